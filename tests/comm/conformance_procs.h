// Process ranks for the [multiproc] conformance tests: forkRanks(n, fn) forks n children, child r
// runs fn(r) (which builds its own TcpStore client; rank 0 hosts the server) and reports the
// returned text through a file; the parent collects exit statuses with a deadline and SIGKILLs
// whatever is still running at it, so a hung rank fails the test instead of hanging it.
// killWhenReady: the whileRunning side of the SIGKILL tests.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/spawn_ranks.h"

namespace ds::test::conformance {

struct ProcResult {
  int rank = 0;
  bool exited = false;  // exited normally (not signalled, not killed at the deadline)
  int exitCode = -1;
  int signal = 0;
  bool timedOut = false;
  std::string text;  // what fn returned (or the exception it threw)
};

inline std::vector<ProcResult> forkRanks(
    int n, const std::function<std::string(int)>& fn, std::chrono::milliseconds timeout,
    const std::function<void(const std::vector<pid_t>&)>& whileRunning = {}) {
  TempDir dir;
  std::vector<pid_t> pids(n, -1);
  std::fflush(nullptr);
  for (int r = 0; r < n; ++r) {
    pid_t pid = ::fork();
    if (pid == 0) {
      std::string text;
      try {
        text = fn(r);
      } catch (const std::exception& e) {
        text = std::string("exception: ") + e.what();
      } catch (...) {
        text = "unknown exception";
      }
      if (FILE* f = std::fopen(dir.file(std::to_string(r)).c_str(), "w")) {
        std::fwrite(text.data(), 1, text.size(), f);
        std::fclose(f);
      }
      ::_exit(text.empty() ? 0 : 1);
    }
    pids[r] = pid;
  }
  if (whileRunning) whileRunning(pids);
  std::vector<ProcResult> res(n);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  int left = n;
  while (left > 0) {
    for (int r = 0; r < n; ++r) {
      if (pids[r] < 0) continue;
      int status = 0;
      pid_t got = ::waitpid(pids[r], &status, WNOHANG);
      if (got != pids[r]) continue;
      res[r].rank = r;
      res[r].exited = WIFEXITED(status);
      res[r].exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      res[r].signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
      pids[r] = -1;
      --left;
    }
    if (left == 0) break;
    if (std::chrono::steady_clock::now() > deadline) {
      for (int r = 0; r < n; ++r) {
        if (pids[r] < 0) continue;
        ::kill(pids[r], SIGKILL);
        ::waitpid(pids[r], nullptr, 0);
        res[r].rank = r;
        res[r].timedOut = true;
        pids[r] = -1;
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (int r = 0; r < n; ++r) {
    try {
      res[r].text = readFile(dir.file(std::to_string(r)));
    } catch (...) {
    }
  }
  return res;
}

// "rank 1: exit 1: <text>" for every rank that did not exit 0, or "".
inline std::string failures(const std::vector<ProcResult>& res) {
  std::string out;
  for (const auto& p : res) {
    if (p.exited && p.exitCode == 0) continue;
    out += "rank " + std::to_string(p.rank) +
           (p.timedOut ? ": killed at the deadline"
            : p.signal ? ": signal " + std::to_string(p.signal)
                       : ": exit " + std::to_string(p.exitCode)) +
           ": " + p.text + "\n";
  }
  return out;
}

// For forkRanks' whileRunning: waits (up to 60 s) until every rank r < n has written the file
// "ready<r>" in dir, lets the ranks run 50 ms more, then SIGKILLs `victim`. Returns when it sent
// the signal.
inline std::chrono::steady_clock::time_point killWhenReady(const TempDir& dir, int n,
                                                           pid_t victim) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  auto allReady = [&] {
    for (int r = 0; r < n; ++r)
      if (!std::filesystem::exists(dir.file("ready" + std::to_string(r)))) return false;
    return true;
  };
  while (!allReady() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const auto at = std::chrono::steady_clock::now();
  ::kill(victim, SIGKILL);
  return at;
}

}  // namespace ds::test::conformance
