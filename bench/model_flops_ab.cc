// bench_model_flops_ab: GPT-2 small shapes (L12 C768 H12, T=256, B=2, vocab 8192, no activation
// checkpointing) one forward+backward step at a time, the modes interleaved step by step so that
// load from other processes hits them alike: fp32; bf16 with linear layers on the native
// AVX512-BF16 gemm (matmul_bf16.h); bf16w, the same bf16 model forced to widen + OpenBLAS sgemm.
// Prints the median and best step per mode. Not the full table (bench_model_flops has it).
// Usage: bench_model_flops_ab [--reps R] [--threads N] [--layers L] [--batch B]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "runtime/model/model.h"
#include "runtime/tensor/matmul_bf16.h"
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

struct Runner {
  std::unique_ptr<Model> m;
  std::vector<float> flat, grad;
  std::vector<bf16> flat16;
  zero::ParamTable t;
  std::vector<int32_t> in, tg;
  int B, T;
  std::vector<double> fwd, bwd;

  Runner(const ModelConfig& cfg, int b, int tt) : m(makeModel(cfg)), B(b), T(tt) {
    const size_t n = m->numParamsTotal();
    flat.resize(n);
    grad.resize(n);
    flat16.resize(n);
    m->initParams(flat.data(), 1);
    for (size_t i = 0; i < n; ++i) flat16[i] = floatToBf16(flat[i]);
    const bool bf = cfg.compute == DType::kBF16;
    size_t off = 0;
    for (const auto& p : m->params()) {
      t.value.push_back(bf ? nullptr : flat.data() + off);
      t.value16.push_back(bf ? flat16.data() + off : nullptr);
      t.grad.push_back(grad.data() + off);
      off += p.numel;
    }
    in.resize(size_t(B) * T);
    tg.resize(size_t(B) * T);
    for (size_t i = 0; i < in.size(); ++i) {
      in[i] = int32_t((i * 7919) % cfg.vocabSize);
      tg[i] = int32_t((i * 104729 + 1) % cfg.vocabSize);
    }
  }
  void step(bool record) {
    NoHooks hooks;
    const double t0 = now();
    m->forward(in.data(), tg.data(), B, T, t, hooks);
    const double t1 = now();
    m->backward(1.0f, t, hooks);
    const double t2 = now();
    if (record) {
      fwd.push_back(t1 - t0);
      bwd.push_back(t2 - t1);
    }
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 5, threads = 0, layers = 12, batch = 2;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--reps" && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (a == "--threads" && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (a == "--layers" && i + 1 < argc) layers = std::atoi(argv[++i]);
    else if (a == "--batch" && i + 1 < argc) batch = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr,
                   "usage: bench_model_flops_ab [--reps R] [--threads N] [--layers L] "
                   "[--batch B]\n");
      return 2;
    }
  }
  if (threads > 0) setComputeThreads(threads);
  ModelConfig c;
  c.nLayer = layers;
  c.nEmbd = 768;
  c.nHead = 12;
  c.seqLen = 256;
  c.vocabSize = 8192;
  const int T = 256;
  std::printf(
      "threads %d, GPT-2 small shapes L%d C768 H12 T%d B%d V8192, median of %d steps "
      "per mode, modes interleaved per step\n",
      computeThreads(), layers, T, batch, reps);
  const char* names[3] = {"fp32", "bf16", "bf16w"};
  std::vector<std::unique_ptr<Runner>> rs;
  for (int mode = 0; mode < 3; ++mode) {
    c.compute = mode == 0 ? DType::kF32 : DType::kBF16;
    rs.push_back(std::make_unique<Runner>(c, batch, T));
  }
  const double flops = makeModel(c)->flopsPerToken() * batch * T;
  for (int r = 0; r < reps + 1; ++r) {  // step 0 allocates
    for (int mode = 0; mode < 3; ++mode) {
      setBf16LinearNative(mode != 2);
      rs[mode]->step(r > 0);
    }
  }
  std::printf("%-6s %12s %12s %12s %10s %9s %12s\n", "mode", "fwd ms med", "bwd ms med",
              "step ms best", "tokens/s", "GFLOP/s", "vs bf16w");
  double wstep = median(rs[2]->fwd) + median(rs[2]->bwd);
  for (int mode = 0; mode < 3; ++mode) {
    Runner& x = *rs[mode];
    std::vector<double> steps;
    for (size_t i = 0; i < x.fwd.size(); ++i) steps.push_back(x.fwd[i] + x.bwd[i]);
    const double step = median(x.fwd) + median(x.bwd);
    std::printf("%-6s %12.1f %12.1f %12.1f %10.0f %9.1f %11.2fx\n", names[mode],
                median(x.fwd) * 1e3, median(x.bwd) * 1e3,
                *std::min_element(steps.begin(), steps.end()) * 1e3, batch * T / step,
                flops / step / 1e9, wstep / step);
  }
  return 0;
}
