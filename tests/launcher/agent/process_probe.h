// Test helpers that look at the real process table: processes carrying a marker string in their
// command line or environment, bounded waits for a child or for the marker to vanish. Header-only
// (shared by tests/launcher/agent and tests/e2e). Every wait has a deadline.
#pragma once

#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace ds::test {

inline std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Live (non-zombie) processes other than this one whose cmdline or environ contains `marker`.
inline std::vector<pid_t> pidsWithMarker(const std::string& marker) {
  std::vector<pid_t> out;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return out;
  while (struct dirent* e = ::readdir(d)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (pid <= 0 || *end != '\0' || pid == ::getpid()) continue;
    std::string base = "/proc/" + std::string(e->d_name);
    std::string stat = slurp(base + "/stat");
    auto paren = stat.rfind(')');
    if (stat.empty() || paren == std::string::npos || paren + 2 >= stat.size()) continue;
    if (stat[paren + 2] == 'Z') continue;
    if (slurp(base + "/cmdline").find(marker) != std::string::npos ||
        slurp(base + "/environ").find(marker) != std::string::npos)
      out.push_back(static_cast<pid_t>(pid));
  }
  ::closedir(d);
  return out;
}

// Polls until no process carries `marker`; returns the survivors at the deadline (empty = ok).
inline std::vector<pid_t> waitMarkerGone(
    const std::string& marker, std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto left = pidsWithMarker(marker);
    if (left.empty() || std::chrono::steady_clock::now() >= deadline) return left;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// "<stat line> | <cmdline>" per pid, for a failing check's message.
inline std::string describePids(const std::vector<pid_t>& pids) {
  std::string out;
  for (pid_t p : pids) {
    std::string base = "/proc/" + std::to_string(p);
    std::string cmd = slurp(base + "/cmdline");
    for (char& c : cmd)
      if (c == '\0') c = ' ';
    std::string stat = slurp(base + "/stat");
    if (!stat.empty() && stat.back() == '\n') stat.pop_back();
    out += stat + " | " + cmd + "\n";
  }
  return out;
}

// Polls until at least `n` processes carry `marker`; false at the deadline.
inline bool waitMarkerCount(const std::string& marker, size_t n,
                            std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (pidsWithMarker(marker).size() < n) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

// Waits for child `pid`; on timeout kills it (SIGKILL), reaps it and returns nullopt.
inline std::optional<int> waitChild(pid_t pid,
                                    std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int st = 0;
    pid_t r = ::waitpid(pid, &st, WNOHANG);
    if (r == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (r < 0) return std::nullopt;
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &st, 0);
      return std::nullopt;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// A marker unique to this test run.
inline std::string uniqueMarker(const std::string& what) {
  return "dsmark_" + what + "_" + std::to_string(::getpid()) + "_" +
         std::to_string(std::chrono::steady_clock::now().time_since_epoch().count() % 1000000007);
}

}  // namespace ds::test
