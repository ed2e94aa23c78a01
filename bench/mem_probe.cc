// Memory-copy probe for bench/comm_efficiency.sh: the bandwidth a single-copy allreduce is bound
// by on this host. NPROC processes (forked here, started together by a process-shared barrier)
// each copy BYTES from one buffer of their own into another, concurrently:
//   memcpy:  glibc memcpy (non-temporal stores at large sizes, no read for ownership)
//   cmaread: process_vm_readv from the next process's buffer (what the single-copy path's
//            system calls do: the kernel's copy, which reads each destination line first)
// timed like raw_timing.h (2 warm-ups, a probe picks the iterations for DS_BENCH_TARGET_SECONDS,
// the slowest process counts). Rows as raw_timing.h's, with algbw = busbw = BYTES / time per
// process: a 2-rank single-copy allreduce of BYTES moves BYTES per rank through such copies
// (half in, half out) and reduces half of them besides, so its busbw stays below these.
// Usage: bench_mem_probe NPROC BYTES...
#include <pthread.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/raw_timing.h"

namespace {

constexpr int kMaxProcs = 64;
constexpr unsigned kGuardSeconds = 900;

struct Shared {
  pthread_barrier_t barrier;
  pid_t pids[kMaxProcs];
  const char* sources[kMaxProcs];  // each process's source buffer, an address in that process
  double seconds[kMaxProcs];
};

struct Probe {
  Shared* shared;
  int index;
  int procs;

  void barrier() { pthread_barrier_wait(&shared->barrier); }
  double maxOf(double x) {
    shared->seconds[index] = x;
    barrier();
    double worst = 0;
    for (int p = 0; p < procs; ++p) worst = std::max(worst, shared->seconds[p]);
    barrier();  // nobody overwrites seconds[] before every process has read it
    return worst;
  }
};

void cmaRead(pid_t pid, const char* remote, char* local, size_t bytes) {
  while (bytes > 0) {
    struct iovec lv {
      local, bytes
    };
    struct iovec rv {
      const_cast<char*>(remote), bytes
    };
    const ssize_t moved = ::process_vm_readv(pid, &lv, 1, &rv, 1, 0);
    if (moved <= 0) {
      std::perror("bench_mem_probe: process_vm_readv");
      std::exit(1);
    }
    remote += moved;
    local += moved;
    bytes -= static_cast<size_t>(moved);
  }
}

int runProcess(Probe probe, const std::vector<size_t>& sizes) {
  ::alarm(kGuardSeconds);  // a process that died leaves the others in the barrier: end them
  const size_t most = *std::max_element(sizes.begin(), sizes.end());
  std::vector<char> src(most, 1), dst(most, 2);
  probe.shared->pids[probe.index] = ::getpid();
  probe.shared->sources[probe.index] = src.data();
  probe.barrier();
  const int next = (probe.index + 1) % probe.procs;
  const auto peer = probe.shared->pids[next];
  const char* remote = probe.shared->sources[next];
  for (const char* op : {"memcpy", "cmaread"}) {
    for (size_t bytes : sizes) {
      const bool cma = std::string(op) == "cmaread";
      auto run = [&] {
        if (cma) {
          cmaRead(peer, remote, dst.data(), bytes);
        } else {
          std::memcpy(dst.data(), src.data(), bytes);
        }
      };
      auto row = ds::bench::timeCollective(
          run, [&](double x) { return probe.maxOf(x); }, [&] { probe.barrier(); },
          ds::bench::targetSeconds());
      if (probe.index == 0) {
        const double gbps = static_cast<double>(bytes) / row.seconds / 1e9;
        std::printf("%-15s %12zu %11zu %6d %11.1f %9.3f %9.3f %6s\n", op, bytes, bytes / 4,
                    row.iters, row.seconds * 1e6, gbps, gbps, "-");
        std::fflush(stdout);
      }
    }
  }
  probe.barrier();  // no process exits (unmapping its source) while another may read it
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: bench_mem_probe NPROC BYTES...\n");
    return 2;
  }
  const int procs = std::atoi(argv[1]);
  if (procs < 1 || procs > kMaxProcs) {
    std::fprintf(stderr, "bench_mem_probe: NPROC '%s' is not in 1..%d\n", argv[1], kMaxProcs);
    return 2;
  }
  std::vector<size_t> sizes;
  for (int a = 2; a < argc; ++a) {
    char* end = nullptr;
    const size_t bytes = std::strtoull(argv[a], &end, 10);
    if (end == argv[a] || *end != '\0' || bytes == 0) {
      std::fprintf(stderr, "bench_mem_probe: BYTES '%s' is not a positive integer\n", argv[a]);
      return 2;
    }
    sizes.push_back(bytes);
  }
  void* mem =
      ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    std::perror("bench_mem_probe: mmap");
    return 1;
  }
  auto* shared = static_cast<Shared*>(mem);
  pthread_barrierattr_t attr;
  pthread_barrierattr_init(&attr);
  pthread_barrierattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  pthread_barrier_init(&shared->barrier, &attr, static_cast<unsigned>(procs));
  if (procs > 1) std::printf("# memory-copy probe, %d processes at once\n", procs);
  std::fflush(stdout);
  std::vector<pid_t> children;
  for (int p = 1; p < procs; ++p) {
    const pid_t child = ::fork();
    if (child < 0) {
      std::perror("bench_mem_probe: fork");
      return 1;
    }
    if (child == 0) return runProcess({shared, p, procs}, sizes);
    children.push_back(child);
  }
  int rc = runProcess({shared, 0, procs}, sizes);
  for (pid_t child : children) {
    int status = 0;
    if (::waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::fprintf(stderr, "bench_mem_probe: process %d failed\n", static_cast<int>(child));
      rc = 1;
    }
  }
  return rc;
}
