// bench_zero_bench: one ZeRO configuration on N forked process ranks over gloo (TcpStore on
// 127.0.0.1): the median step time (hooks + reduce + optimizer + param refresh) and each rank's
// peak RSS (VmHWM from /proc/self/status) next to the engine's MemoryReport and the ZeRO formula.
// The "model" is synthetic: L blocks of one weight + one bias, the backward writes a fixed
// gradient pattern through the ParamTable (no arithmetic model), so the time is ZeRO's own cost.
// Not a test: prints one result line (bench/zero_bench.sh runs the sweep).
// Usage: bench_zero_bench --world N --stage S [--offload none|cpu|nvme] [--nvme DIR]
//        [--params PSI] [--blocks L] [--steps K] [--bf16] [--bucket ELEMS] [--overlap 0|1]
//        [--param-offload none|cpu|nvme]
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "comm/process_group.h"
#include "comm/registry.h"
#include "comm/store/tcp_store.h"
#include "zero/zero_engine.h"

using namespace ds;
using namespace ds::zero;

namespace {

struct Args {
  int world = 2, stage = 0, blocks = 12, steps = 4, overlap = 1;
  size_t params = 100000000, bucket = 20000000;
  std::string offload = "none", nvme = "/tmp", paramOffload = "none";
  bool bf16 = false;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s: missing value\n", k.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (k == "--world") a.world = std::stoi(val());
    else if (k == "--stage") a.stage = std::stoi(val());
    else if (k == "--blocks") a.blocks = std::stoi(val());
    else if (k == "--steps") a.steps = std::stoi(val());
    else if (k == "--params") a.params = size_t(std::stod(val()));
    else if (k == "--bucket") a.bucket = size_t(std::stod(val()));
    else if (k == "--overlap") a.overlap = std::stoi(val());
    else if (k == "--offload") a.offload = val();
    else if (k == "--nvme") a.nvme = val();
    else if (k == "--param-offload") a.paramOffload = val();
    else if (k == "--bf16") a.bf16 = true;
    else {
      std::fprintf(stderr, "unknown option %s (see the header of bench/zero_bench.cc)\n",
                   k.c_str());
      std::exit(2);
    }
  }
  return a;
}

// kB of one field of /proc/self/status (VmHWM, VmRSS).
long statusKb(const char* field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  const size_t n = std::strlen(field);
  while (std::getline(f, line))
    if (line.compare(0, n, field) == 0 && line.size() > n && line[n] == ':')
      return std::atol(line.c_str() + n + 1);
  return -1;
}

int freePort() {
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    std::perror("bind");
    std::exit(1);
  }
  ::close(s);
  return ntohs(a.sin_port);
}

std::vector<ParamInfo> model(const Args& a) {
  std::vector<ParamInfo> ps;
  const size_t bias = 1024, w = a.params / size_t(a.blocks) - bias;
  for (int b = 0; b < a.blocks; ++b) {
    ps.push_back({"w" + std::to_string(b), {}, w, {b}, true});
    ps.push_back({"b" + std::to_string(b), {}, bias, {b}, false});
  }
  return ps;
}

struct RankOut {
  double stepMs = 0;  // median over steps after the first
  long hwmKb = 0, baseKb = 0;
  double statesMiB = 0;   // MemoryReport params + grads + optimizer states, device + host
  double buffersMiB = 0;  // MemoryReport buffers, device + host
};

RankOut runRank(const Args& a, int rank, int port) {
  comm::TcpStoreOptions so;
  so.port = port;
  so.isServer = rank == 0;
  so.token = "zero-bench";
  so.timeout = std::chrono::seconds(120);
  auto store = std::make_shared<comm::TcpStore>(so);
  comm::GroupOptions go;
  go.backend = "gloo";
  go.timeout = std::chrono::seconds(600);
  go.hostAddr = "127.0.0.1";
  comm::ProcessGroup pg(comm::createBackend("gloo", store, rank, a.world, go));
  RankOut out;
  out.baseKb = statusKb("VmRSS");
  ZeroOptions z;
  z.stage = a.stage;
  z.compute = a.bf16 ? DType::kBF16 : DType::kF32;
  z.reduceBucketSize = a.bucket;
  z.allgatherBucketSize = a.bucket;
  z.overlapComm = a.overlap != 0;
  z.subGroupSize = 2000000;  // nvme tiles: 4 slots x 3 states x 8 MB
  if (a.offload != "none") {
    z.offloadOptimizer.device = a.offload;
    z.offloadOptimizer.nvmePath = a.nvme;
  }
  z.offloadParam.device = a.paramOffload;
  z.offloadParam.nvmePath = a.nvme;
  auto ps = model(a);
  OptimizerOptions o;
  ZeroEngine eng(ps, a.blocks, &pg, z, o);
  std::vector<double> times;
  for (int s = 0; s < a.steps; ++s) {
    auto t0 = std::chrono::steady_clock::now();
    eng.beginStep(true);
    volatile float sink = 0;
    for (int b = 0; b < a.blocks; ++b) {
      eng.beforeForward(b);
      auto& t = eng.table();
      for (size_t p : {size_t(2 * b), size_t(2 * b + 1)})
        sink = sink + (a.bf16 ? float(t.value16[p] != nullptr) : t.value[p][0]);
      eng.afterForward(b);
    }
    for (int b = a.blocks - 1; b >= 0; --b) {
      eng.beforeBackward(b);
      auto& t = eng.table();
      for (size_t p : {size_t(2 * b), size_t(2 * b + 1)}) {
        float* g = t.grad[p];
        const float base = 1e-3f * float(rank + 1);
        for (size_t i = 0; i < ps[p].numel; ++i) g[i] += base * float(int(i % 7) - 3);
      }
      eng.afterBackward(b);
    }
    eng.step(1e-3f, 1.f, 0.f);
    times.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::vector<double> rest(times.begin() + (times.size() > 1 ? 1 : 0), times.end());
  std::sort(rest.begin(), rest.end());
  out.stepMs = rest[rest.size() / 2];
  auto m = eng.memory();
  double states = 0;
  for (int k = 0; k < 3; ++k) states += double(m.bytes[k][0] + m.bytes[k][1]);
  out.statesMiB = states / (1 << 20);
  out.buffersMiB = double(m.bytes[3][0] + m.bytes[3][1]) / (1 << 20);
  out.hwmKb = statusKb("VmHWM");
  return out;
}

// Model states per rank in bytes (params + grads + optimizer states, device + host), the ZeRO
// formula with this engine's terms (tests/zero/memory_report_test.cc states them): e = 4 or 2,
// grads fp32, K = 12 (8 for fp32 with the master in memory and aliased to the model's fp32
// params: no optimizer offload and no parameter nvme swap).
double formulaBytes(const Args& a) {
  const double psi = double(a.params), N = a.world, e = a.bf16 ? 2 : 4;
  const bool off = a.offload != "none" || a.paramOffload == "nvme";
  const double K = (!a.bf16 && !off) ? 8 : 12;
  const double Kmem = a.offload == "nvme" ? 0 : K;  // nvme states are not in RAM
  switch (a.stage) {
    case 0: return (e + 4 + Kmem) * psi;
    case 1: return (e + 4) * psi + Kmem * psi / N;
    case 2: return e * psi + (4 + Kmem) * psi / N;
    default: return ((a.paramOffload == "nvme" ? 0 : e) + 4 + Kmem) * psi / N;
  }
}

// The ZeRO paper's model states per rank (Rajbhandari et al. 2020, §5: mixed precision with fp16
// params and grads, K = 12 bytes of fp32 master + Adam states per parameter, nothing offloaded):
// stage 0 (2+2+K)Psi, stage 1 2Psi+2Psi+K*Psi/N, stage 2 2Psi+(2+K)Psi/N, stage 3 (2+2+K)Psi/N.
double paperBytes(const Args& a) {
  const double psi = double(a.params), N = a.world, K = 12;
  switch (a.stage) {
    case 0: return (2 + 2 + K) * psi;
    case 1: return 2 * psi + 2 * psi + K * psi / N;
    case 2: return 2 * psi + (2 + K) * psi / N;
    default: return (2 + 2 + K) * psi / N;
  }
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  const int port = freePort();
  std::vector<int> fds(size_t(a.world));
  std::vector<pid_t> pids;
  for (int r = 0; r < a.world; ++r) {
    int p[2];
    if (::pipe(p) != 0) return 1;
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(p[0]);
      int rc = 0;
      RankOut o;
      try {
        o = runRank(a, r, port);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: %s\n", r, e.what());
        rc = 1;
      }
      if (::write(p[1], &o, sizeof o) != ssize_t(sizeof o)) rc = 1;
      ::_exit(rc);
    }
    ::close(p[1]);
    fds[size_t(r)] = p[0];
    pids.push_back(pid);
  }
  std::vector<RankOut> outs(size_t(a.world));
  int bad = 0;
  for (int r = 0; r < a.world; ++r) {
    if (::read(fds[size_t(r)], &outs[size_t(r)], sizeof(RankOut)) != ssize_t(sizeof(RankOut)))
      bad++;
    ::close(fds[size_t(r)]);
  }
  for (pid_t pid : pids) {
    int st = 0;
    ::waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) bad++;
  }
  if (bad) {
    std::fprintf(stderr, "a rank failed\n");
    return 1;
  }
  double step = 0, hwm = 0, hwmMin = 1e300, base = 0, rep = 0, buf = 0;
  for (const auto& o : outs) {
    step = std::max(step, o.stepMs);
    hwm = std::max(hwm, double(o.hwmKb) / 1024);
    hwmMin = std::min(hwmMin, double(o.hwmKb) / 1024);
    base = std::max(base, double(o.baseKb) / 1024);
    rep = std::max(rep, o.statesMiB);
    buf = std::max(buf, o.buffersMiB);
  }
  // Per rank (max over ranks): VmHWM range over ranks, RSS before the engine existed, the
  // engine's report (model states | buffers) and the formula for the model states.
  // paper: the ZeRO paper's formula for the stage (no offload, fp16 params and grads).
  const std::string po = a.paramOffload == "none" ? "" : " +params " + a.paramOffload;
  std::printf(
      "stage %d %-4s offload %-4s%s world %d params %zu | step_ms %8.1f | VmHWM_MiB %6.0f..%-6.0f"
      " | base_RSS %4.0f | report states %6.0f + buffers %5.0f | formula states %6.0f"
      " | paper %6.0f\n",
      a.stage, a.bf16 ? "bf16" : "fp32", a.offload.c_str(), po.c_str(), a.world, a.params, step,
      hwmMin, hwm, base, rep, buf, formulaBytes(a) / (1 << 20), paperBytes(a) / (1 << 20));
  return 0;
}
