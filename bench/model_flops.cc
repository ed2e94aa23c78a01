// bench_model_flops: forward+backward throughput of the CPU GPT-2 (tokens/s, achieved GFLOP/s by
// the model's flopsPerToken = 6N + 6LCT) for a small GPT and GPT-2 small shapes (12 x 768, 12
// heads, T=256, vocab 8192), fp32 and bf16, with and without activation checkpointing (and the
// activation bytes held), next to OpenBLAS sgemm GFLOP/s measured in the same run at a
// model-like shape. No optimizer and no communication: the model's own cost only. bf16 rows run
// the linear layers on the native AVX512-BF16 gemm (runtime/tensor/matmul_bf16.h) where the CPU
// has it; "bf16w" rows force the older path (widen bf16 weights to fp32, OpenBLAS sgemm) in the
// same run. Debian's OpenBLAS 0.3.21 is built without BUILD_BFLOAT16 (cblas_sbgemm is declared in
// cblas.h but absent from the library), hence our own kernel.
// Usage: bench_model_flops [--quick] [--reps R] [--threads N] [--only NAME] [--memory] [--sgemm
// ROWS] (best of R steps per row; --only keeps the models whose name contains NAME, e.g. "GPT-2";
// --memory: one forward per fp32/bf16 row, only the activation bytes, no timing; --sgemm: only
// the sgemm peak at ROWS x 3072 x 768, our split and OpenBLAS's own pool, then exit)
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "runtime/model/model.h"
#include "runtime/tensor/bf16_gemm.h"
#include "runtime/tensor/blas_core.h"
#include "runtime/tensor/matmul_bf16.h"
#include "runtime/tensor/sgemm.h"
#include "runtime/tensor/threads.h"

using namespace ds;
using namespace ds::runtime;

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct NoHooks : zero::BlockHooks {
  void beforeForward(int) override {}
  void afterForward(int) override {}
  void beforeBackward(int) override {}
  void afterBackward(int) override {}
};

// The model's sgemm (runtime/tensor/sgemm.h: split over the OpenMP team, OpenBLAS at 1 thread per
// call), or with pool=true one OpenBLAS call on OpenBLAS's own pool of computeThreads() threads
// (what the runtime did before the thread policy), best of reps after a warm-up call.
double sgemmGflops(int M, int N, int K, int reps, bool pool = false) {
  std::vector<float> a(size_t(M) * K, 0.01f), b(size_t(N) * K, 0.02f), c(size_t(M) * N);
  if (pool) openblas_set_num_threads(computeThreads());
  double best = 1e30;
  for (int r = 0; r < reps + 1; ++r) {  // first call warms the threads
    double t0 = now();
    if (pool)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, a.data(), K, b.data(), K,
                  0.0f, c.data(), N);
    else sgemm(false, true, M, N, K, 1.0f, a.data(), K, b.data(), K, 0.0f, c.data(), N);
    if (r > 0) best = std::min(best, now() - t0);
  }
  if (pool) openblas_set_num_threads(1);
  return 2.0 * M * N * K / best / 1e9;
}

double bf16GemmGflops(int M, int N, int K, int reps) {
  std::vector<float> a(size_t(M) * K, 0.01f), c(size_t(M) * N);
  std::vector<bf16> b(size_t(N) * K, floatToBf16(0.02f));
  double best = 1e30;
  for (int r = 0; r < reps + 1; ++r) {
    double t0 = now();
    gemmBf16(M, N, K, f32Operand(a.data(), K, 1), bf16Operand(b.data(), K, 1), c.data(), N, 0.0f);
    if (r > 0) best = std::min(best, now() - t0);
  }
  return 2.0 * M * N * K / best / 1e9;
}

struct Row {
  double fwd = 0, bwd = 0;
  size_t act = 0;
};

// memoryOnly: one forward (allocates everything backward needs), no backward, no timing.
Row runModel(ModelConfig cfg, int B, int T, int reps, bool memoryOnly = false) {
  auto m = makeModel(cfg);
  const size_t n = m->numParamsTotal();
  std::vector<float> flat(n), grad(n);
  std::vector<bf16> flat16(n);
  m->initParams(flat.data(), 1);
  for (size_t i = 0; i < n; ++i) flat16[i] = floatToBf16(flat[i]);
  zero::ParamTable t;
  size_t off = 0;
  const bool bf = cfg.compute == DType::kBF16;
  for (const auto& p : m->params()) {
    t.value.push_back(bf ? nullptr : flat.data() + off);
    t.value16.push_back(bf ? flat16.data() + off : nullptr);
    t.grad.push_back(grad.data() + off);
    off += p.numel;
  }
  std::vector<int32_t> in(size_t(B) * T), tg(size_t(B) * T);
  for (size_t i = 0; i < in.size(); ++i) {
    in[i] = int32_t((i * 7919) % cfg.vocabSize);
    tg[i] = int32_t((i * 104729 + 1) % cfg.vocabSize);
  }
  NoHooks hooks;
  Row best{1e30, 1e30, 0};
  if (memoryOnly) {
    m->forward(in.data(), tg.data(), B, T, t, hooks);
    best.act = m->activationBytes();
    return best;
  }
  for (int r = 0; r < reps + 1; ++r) {  // first step allocates
    double t0 = now();
    m->forward(in.data(), tg.data(), B, T, t, hooks);
    double t1 = now();
    m->backward(1.0f, t, hooks);
    double t2 = now();
    if (r > 0) {
      best.fwd = std::min(best.fwd, t1 - t0);
      best.bwd = std::min(best.bwd, t2 - t1);
    }
  }
  best.act = m->activationBytes();
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  reexecForBlasCore(argv);  // the kernels dsrt runs (runtime/tensor/blas_core.h)
  bool quick = false, memory = false;
  int reps = 3, threads = 0, sgemmRows = 0;
  std::string only;  // substring of the model name; empty: all
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--quick") quick = true;
    else if (a == "--reps" && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (a == "--threads" && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (a == "--only" && i + 1 < argc) only = argv[++i];
    else if (a == "--memory") memory = true;
    else if (a == "--sgemm" && i + 1 < argc) sgemmRows = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr,
                   "usage: bench_model_flops [--quick] [--reps R] [--threads N] [--only NAME] "
                   "[--memory] [--sgemm ROWS]\n");
      return 2;
    }
  }
  if (threads > 0) setComputeThreads(threads);
  std::printf("threads %d, OpenBLAS core %s, best of %d steps\n", computeThreads(),
              blasCoreName().c_str(), reps);
  if (sgemmRows > 0) {  // the peak for bench/cpu_train.sh: ROWS x 3072 x 768 (GPT-2 small's fc)
    const double split = sgemmGflops(sgemmRows, 3072, 768, reps);
    const double pool = sgemmGflops(sgemmRows, 3072, 768, reps, true);
    std::printf(
        "sgemm %dx3072x768 threads %d: split %.1f GFLOP/s, OpenBLAS pool %.1f GFLOP/s, "
        "peak %.1f\n",
        sgemmRows, computeThreads(), split, pool, std::max(split, pool));
    return 0;
  }
  struct Shape {
    const char* name;
    int L, C, NH, T, V, B;
  };
  std::vector<Shape> shapes = {{"small GPT (L4 C256 H4)", 4, 256, 4, 128, 4096, 4},
                               {"GPT-2 small (L12 C768 H12)", 12, 768, 12, 256, 8192, 2}};
  if (quick) shapes = {{"tiny GPT (L2 C64 H2)", 2, 64, 2, 64, 512, 2}};
  if (!only.empty()) {
    std::erase_if(shapes, [&](const Shape& s) {
      return std::string(s.name).find(only) == std::string::npos;
    });
  }
  if (memory) {
    std::printf("%-28s %-5s %-4s %12s\n", "model", "dtype", "ckpt", "act MiB");
    for (const Shape& s : shapes)
      for (DType dt : {DType::kF32, DType::kBF16})
        for (bool ck : {false, true}) {
          ModelConfig c;
          c.nLayer = s.L;
          c.nEmbd = s.C;
          c.nHead = s.NH;
          c.seqLen = s.T;
          c.vocabSize = s.V;
          c.compute = dt;
          c.activationCheckpointing = ck;
          Row r = runModel(c, s.B, s.T, 0, true);
          std::printf("%-28s %-5s %-4s %12.1f\n", s.name, std::string(dtypeName(dt)).c_str(),
                      ck ? "on" : "off", static_cast<double>(r.act) / 1048576.0);
          std::fflush(stdout);
        }
    return 0;
  }
  // sgemm at the shapes the model spends most time in: [B*T, C] x [C, 4C].
  for (const Shape& s : shapes) {
    const int M = s.B * s.T;
    std::printf("sgemm %dx%dx%d (B*T x 4C x C): %.1f GFLOP/s; bf16 gemm (%s): %.1f GFLOP/s\n", M,
                4 * s.C, s.C, sgemmGflops(M, 4 * s.C, s.C, reps),
                bf16GemmNativeAvailable() ? "AVX512-BF16" : "widen+sgemm",
                bf16GemmGflops(M, 4 * s.C, s.C, reps));
  }
  std::printf("%-28s %-5s %-4s %9s %9s %10s %9s %12s\n", "model", "dtype", "ckpt", "fwd ms",
              "bwd ms", "tokens/s", "GFLOP/s", "act MiB");
  for (const Shape& s : shapes) {
    for (int mode = 0; mode < 3; ++mode) {  // fp32, bf16, bf16 forced to widen + sgemm
      const DType dt = mode == 0 ? DType::kF32 : DType::kBF16;
      setBf16LinearNative(mode != 2);
      for (bool ck : {false, true}) {
        ModelConfig c;
        c.nLayer = s.L;
        c.nEmbd = s.C;
        c.nHead = s.NH;
        c.seqLen = s.T;
        c.vocabSize = s.V;
        c.compute = dt;
        c.activationCheckpointing = ck;
        Row r = runModel(c, s.B, s.T, reps);
        const double tok = double(s.B) * s.T, step = r.fwd + r.bwd;
        const double flops = makeModel(c)->flopsPerToken() * tok;
        std::printf("%-28s %-5s %-4s %9.1f %9.1f %10.0f %9.1f %12.1f\n", s.name,
                    mode == 2 ? "bf16w" : std::string(dtypeName(dt)).c_str(), ck ? "on" : "off",
                    r.fwd * 1e3, r.bwd * 1e3, tok / step, flops / step / 1e9,
                    static_cast<double>(r.act) / 1048576.0);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
