// bench_cpu_adam: CPU Adam throughput (params/s and GB/s) of each ISA path at 1 and 2 threads,
// next to a STREAM triad measured in the same run on arrays of the same size. Bytes are counted
// as DeepSpeed would: read p, g, m, v and write p, m, v (28 B/param), +2 B with the bf16 copy;
// triad counts 3 arrays x 4 B (STREAM convention, no write-allocate).
// Usage: bench_cpu_adam [--n ELEMS] [--reps R]   (best of R runs per row)
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "zero/cpu_adam.h"

using namespace ds;
using namespace ds::zero;

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

template <typename F>
double best(int reps, F&& f) {
  double b = 1e30;
  for (int r = 0; r < reps; ++r) {
    double t0 = now();
    f();
    b = std::min(b, now() - t0);
  }
  return b;
}

void triad(float* __restrict a, const float* __restrict b, const float* __restrict c, size_t n,
           int threads) {
#pragma omp parallel for simd num_threads(threads) schedule(static)
  for (long i = 0; i < long(n); ++i) a[i] = b[i] + 0.5f * c[i];
}

std::string loadAvg() {
  FILE* f = std::fopen("/proc/loadavg", "r");
  char buf[128] = {};
  if (f) {
    if (!std::fgets(buf, sizeof buf, f)) buf[0] = 0;
    std::fclose(f);
  }
  std::string s(buf);
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  size_t n = size_t(1) << 24;  // 16M params: 4 x 64 MiB fp32 arrays, far past L3
  int reps = 7;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--n")) n = std::strtoull(argv[i + 1], nullptr, 10);
    else if (!std::strcmp(argv[i], "--reps")) reps = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: %s [--n ELEMS] [--reps R]\n", argv[0]);
      return 2;
    }
  }
  std::vector<float> p(n), g(n), m(n), v(n), a(n);  // a: the triad's output
  std::vector<uint16_t> h(n);
#pragma omp parallel for
  for (long i = 0; i < long(n); ++i) {
    p[size_t(i)] = 0.01f * float(i % 97);
    g[size_t(i)] = 0.001f * float(i % 89) - 0.04f;
    m[size_t(i)] = 0.f;
    v[size_t(i)] = 0.f;
    a[size_t(i)] = 0.f;
  }
  std::printf("n = %zu params, best of %d; bytes/param: adam 28, adam+bf16 30, triad 12\n", n,
              reps);
  std::printf("cores online %d, /proc/loadavg at start: %s\n", omp_get_num_procs(),
              loadAvg().c_str());
  std::printf("%-8s %-7s %-10s %10s %10s %10s %8s\n", "threads", "isa", "kernel", "Mparams/s",
              "GB/s", "triadGB/s", "%triad");
  // Each row alternates R triads with R kernel runs and keeps the best of each, so both see the
  // same share of a busy machine (the triad column is therefore per row).
  for (int threads : {1, 2}) {
    for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
      if (!isaSupported(isa)) continue;
      for (bool with16 : {false, true}) {
        AdamConfig cfg;
        cfg.weightDecay = 0.01f;
        int64_t step = 0;
        double t = 1e30, tri = 1e30;
        const int rowReps = isa == Isa::kScalar ? std::min(reps, 2) : reps;
        for (int r = 0; r < rowReps; ++r) {
          tri = std::min(tri, best(1, [&] { triad(a.data(), g.data(), m.data(), n, threads); }));
          t = std::min(t, best(1, [&] {
                         adamStep(isa, cfg, ++step, 1.f, p.data(), g.data(), m.data(), v.data(), n,
                                  with16 ? Half16Out{DType::kBF16, h.data()} : Half16Out{},
                                  threads);
                       }));
        }
        const double triGBs = 12.0 * double(n) / tri / 1e9;
        double bytes = (with16 ? 30.0 : 28.0) * double(n);
        double gbs = bytes / t / 1e9;
        std::printf("%-8d %-7s %-10s %10.1f %10.2f %10.2f %7.0f%%\n", threads,
                    std::string(isaName(isa)).c_str(), with16 ? "adam+bf16" : "adam",
                    double(n) / t / 1e6, gbs, triGBs, 100.0 * gbs / triGBs);
        std::fflush(stdout);
      }
    }
  }
  std::printf("/proc/loadavg at end: %s\n", loadAvg().c_str());
  return 0;
}
