// Implementation of the multi-rank and process test helpers.
#include "tests/support/spawn_ranks.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

#include "core/error.h"
#include "ds/config.h"

namespace ds::test {

void runRanks(int n, const std::function<void(int)>& fn, std::chrono::milliseconds timeout) {
  std::vector<std::future<void>> futs;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    std::packaged_task<void()> task([&fn, r] { fn(r); });
    futs.push_back(task.get_future());
    threads.emplace_back(std::move(task));
  }
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::exception_ptr first;
  int stuck = -1;
  for (int r = 0; r < n; ++r) {
    if (futs[r].wait_until(deadline) != std::future_status::ready) {
      stuck = r;
      break;
    }
  }
  if (stuck >= 0) {
    for (auto& t : threads) t.detach();
    throw TimeoutError(fmt::format("runRanks: rank {} of {} did not finish within {} ms", stuck, n,
                                   timeout.count()));
  }
  for (auto& t : threads) t.join();
  for (auto& f : futs) {
    try {
      f.get();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

namespace {

// Whether 127.0.0.1:port can be bound now (the socket is closed again).
bool canBind(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  DS_CHECK(fd >= 0, "socket");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

// The first port of the kernel's ephemeral range (32768 where it cannot be read).
int ephemeralLow() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0, high = 0;
  if (in >> low >> high && low > 0) return low;
  return 32768;
}

}  // namespace

int freePort() {
  static std::mutex mu;
  static std::mt19937 rng(
      static_cast<unsigned>(::getpid()) * 2654435761u ^
      static_cast<unsigned>(std::chrono::steady_clock::now().time_since_epoch().count()));
  const int high = ephemeralLow() - 1;
  const int low = std::max(1024, high - 12000);
  if (high - low >= 1000) {
    std::lock_guard<std::mutex> lock(mu);
    std::uniform_int_distribution<int> pick(low, high);
    for (int attempt = 0; attempt < 200; ++attempt) {
      int port = pick(rng);
      if (canBind(port)) return port;
    }
  }
  // No room below the ephemeral range (or all taken): let the kernel pick one.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  DS_CHECK(fd >= 0, "socket");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  DS_CHECK(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0, "bind");
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base ? base : "/tmp") + "/dstest.XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  DS_CHECK(::mkdtemp(buf.data()) != nullptr, "mkdtemp {}", tmpl);
  path_ = buf.data();
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

void writeFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  DS_CHECK(out.good(), "write {}", path);
}

std::string dsrtCommand() {
  return "env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u MASTER_ADDR -u MASTER_PORT " +
         std::string(DS_BINARY_DIR) + "/dsrt ";
}

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int runCommand(const std::string& cmd, std::string* output, std::chrono::milliseconds timeout) {
  int pipefd[2];
  DS_CHECK(::pipe(pipefd) == 0, "pipe");
  pid_t pid = ::fork();
  DS_CHECK(pid >= 0, "fork");
  if (pid == 0) {
    ::setpgid(0, 0);
    ::dup2(pipefd[1], 1);
    ::dup2(pipefd[1], 2);
    ::close(pipefd[0]);
    ::close(pipefd[1]);
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  ::close(pipefd[1]);
  std::string out;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  bool exited = false, timedOut = false, eof = false;
  std::chrono::steady_clock::time_point drainUntil{};
  // Reads until the command has exited and its output is drained. Descendants that outlive it
  // and keep the pipe open are not waited for beyond 2 s (and are not killed: tests that check
  // for orphans must see them).
  while (!eof) {
    pollfd p{pipefd[0], POLLIN, 0};
    if (::poll(&p, 1, 10) > 0) {
      char buf[4096];
      ssize_t n = ::read(pipefd[0], buf, sizeof buf);
      if (n > 0) out.append(buf, static_cast<size_t>(n));
      else if (n == 0) eof = true;
    }
    auto now = std::chrono::steady_clock::now();
    if (!exited) {
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        exited = true;
        drainUntil = now + std::chrono::seconds(2);
      } else if (now > deadline) {
        ::kill(-pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        exited = timedOut = true;
        drainUntil = now + std::chrono::milliseconds(200);
      }
    } else if (now > drainUntil) {
      break;
    }
  }
  if (!exited) ::waitpid(pid, &status, 0);
  ::close(pipefd[0]);
  if (output) *output = out;
  if (timedOut) return 124;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace ds::test
