// Helpers of the restart and fault end-to-end tests (restart_e2e_test.cc, fault_test.cc): dsrun
// run with its output read line by line and each line stamped with the wall-clock time it
// arrived (to time teardowns against the killed rank's own stamp), `dsrun train` command lines
// for a ZeRO configuration, and the per-step losses of a run summary. Header-only; everything
// runs the real binaries.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "tests/e2e/launch_e2e.h"

namespace ds::test::e2e {

inline double wallNow() {
  struct timespec t {};
  ::clock_gettime(CLOCK_REALTIME, &t);
  return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
}

struct TimedLine {
  double at = 0;  // wall-clock seconds when dsrun's output carried it
  std::string text;
};

struct TimedRun {
  int status = -1;    // exit status (128+signal when killed), -1 when it hit the deadline
  double exitAt = 0;  // wall-clock seconds when dsrun was reaped
  std::vector<TimedLine> lines;
  std::string output() const {
    std::string s;
    for (const auto& l : lines) s += l.text + "\n";
    return s;
  }
  // The first line containing `needle`, or nullptr.
  const TimedLine* find(const std::string& needle) const {
    for (const auto& l : lines)
      if (l.text.find(needle) != std::string::npos) return &l;
    return nullptr;
  }
  int count(const std::string& needle) const {
    int n = 0;
    for (const auto& l : lines) n += l.text.find(needle) != std::string::npos ? 1 : 0;
    return n;
  }
};

// `sh -c cmd` in its own process group, stdout and stderr on one pipe read here line by line.
// At the deadline the group is SIGKILLed and status is -1.
inline TimedRun runTimed(const std::string& cmd, std::chrono::seconds timeout) {
  int fds[2];
  REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::setpgid(0, 0);
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  ::close(fds[1]);
  TimedRun run;
  const auto deadline = Clock::now() + timeout;
  std::string pending;
  bool reaped = false, eof = false;
  std::chrono::steady_clock::time_point drainUntil{};
  while (!eof) {
    auto now = Clock::now();
    if (!reaped && now > deadline) {
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      run.status = -1;
      reaped = true;
      drainUntil = now;
    }
    if (reaped && now > drainUntil) break;  // a leftover holds the pipe: stop reading
    struct pollfd p {
      fds[0], POLLIN, 0
    };
    if (::poll(&p, 1, 20) > 0) {
      char buf[8192];
      ssize_t n = ::read(fds[0], buf, sizeof buf);
      if (n <= 0) {
        eof = true;
      } else {
        const double at = wallNow();
        pending.append(buf, static_cast<size_t>(n));
        for (size_t nl; (nl = pending.find('\n')) != std::string::npos;) {
          run.lines.push_back({at, pending.substr(0, nl)});
          pending.erase(0, nl + 1);
        }
      }
    }
    int st = 0;
    if (!reaped && ::waitpid(pid, &st, WNOHANG) == pid) {
      run.exitAt = wallNow();
      run.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      reaped = true;
      drainUntil = Clock::now() + std::chrono::seconds(2);
    }
  }
  if (!pending.empty()) run.lines.push_back({wallNow(), pending});
  ::close(fds[0]);
  if (!reaped) {
    int st = 0;
    ::waitpid(pid, &st, 0);
    run.exitAt = wallNow();
    run.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
  return run;
}

// The wall-clock stamp a DS_FAULT_KILL line carries ("... (time 1795617171.131575)"), or 0.
inline double faultKillTime(const TimedRun& run) {
  const TimedLine* l = run.find("DS_FAULT_KILL: rank");
  if (!l) return 0;
  auto at = l->text.rfind("(time ");
  return at == std::string::npos ? 0 : std::atof(l->text.c_str() + at + 6);
}

// A ZeRO configuration of the fault set: stage and offload mode (none, cpu, nvme).
struct ZeroConfig {
  int stage = 0;
  std::string offload = "none";
  std::string name() const { return "stage " + std::to_string(stage) + ", offload " + offload; }
  // --set flags; nvme swap files go under swapDir.
  std::string flags(const std::string& swapDir) const {
    std::string z = " --set deepspeed.zero_optimization.stage=" + std::to_string(stage);
    if (offload == "none") return z;
    const std::string o = " --set deepspeed.zero_optimization.offload_optimizer.";
    z += o + "device=" + offload;
    if (offload == "nvme") z += o + "nvme_path=" + swapDir;
    if (stage == 3) {
      const std::string p = " --set deepspeed.zero_optimization.offload_param.";
      z += p + "device=" + offload;
      if (offload == "nvme") z += p + "nvme_path=" + swapDir;
    }
    return z;
  }
};

// Every valid stage x offload pair: stage 0 has no offload (the config refuses it), stage 3
// offloads parameters too.
inline std::vector<ZeroConfig> allZeroConfigs() {
  std::vector<ZeroConfig> v{{0, "none"}};
  for (int s = 1; s <= 3; ++s)
    for (const char* o : {"none", "cpu", "nvme"}) v.push_back({s, o});
  return v;
}

// The training run of these tests: the built-in plan, kSteps steps, a checkpoint every
// kCkptEvery, no periodic eval.
inline constexpr int kSteps = 16;
inline constexpr int kCkptEvery = 3;

// `cd dir && [env] dsrun <launchFlags> train ...` with the checkpoint dir dir/ckpt and nvme swap
// files in dir/nvme (both created).
inline std::string trainCommand(const TempDir& dir, const ZeroConfig& z,
                                const std::string& launchFlags, const std::string& env = "") {
  ::mkdir(dir.file("ckpt").c_str(), 0700);
  ::mkdir(dir.file("nvme").c_str(), 0700);
  return "cd " + dir.path() + " && " + env + " exec " + dsrunPath() + " " + launchFlags +
         " train --set train.checkpoint.dir=" + dir.file("ckpt") +
         " --set train.steps=" + std::to_string(kSteps) +
         " --set train.checkpoint.every=" + std::to_string(kCkptEvery) +
         " --set train.eval_every=0 --set train.log_every=1" + z.flags(dir.file("nvme"));
}

// The run summary's first step and per-step losses (exact: JSON keeps every double).
struct Trajectory {
  long firstStep = -1;
  std::vector<double> losses;
};

inline Trajectory readTrajectory(const std::string& summaryPath) {
  Trajectory t;
  std::string s = readFile(summaryPath);
  auto fs = s.find("\"first_step\":");
  if (fs != std::string::npos) t.firstStep = std::atol(s.c_str() + fs + 13);
  auto at = s.find("\"losses\":");
  if (at == std::string::npos) return t;
  at = s.find('[', at);
  auto end = s.find(']', at);
  const char* p = s.c_str() + at + 1;
  const char* stop = s.c_str() + end;
  while (p < stop) {
    char* next = nullptr;
    double v = std::strtod(p, &next);
    if (next == p) break;
    t.losses.push_back(v);
    p = next;
    while (p < stop && (*p == ',' || *p == ' ' || *p == '\n')) ++p;
  }
  return t;
}

// Whether the resumed run's losses are the uninterrupted run's from its first step on, bitwise.
inline bool sameTrajectory(const Trajectory& full, const Trajectory& resumed) {
  if (resumed.firstStep < 0 || full.losses.size() != static_cast<size_t>(kSteps)) return false;
  const size_t first = static_cast<size_t>(resumed.firstStep);
  if (resumed.losses.size() + first != full.losses.size()) return false;
  for (size_t i = 0; i < resumed.losses.size(); ++i)
    if (resumed.losses[i] != full.losses[first + i]) return false;
  return true;
}

}  // namespace ds::test::e2e
