// bench_gpu_ops: the time of every op of one GPT-2 training step on an Ops device, one op at a
// time at the step's shapes (default GPT-2 124M, B=16, T=1024, bf16), so a step's time can be
// split by op and each op set against its floor (matrix ops: FLOP/s against the dense bf16 peak;
// memory ops: bytes moved against the copy bandwidth measured in the same run). Host clock around
// a synchronize, median of --reps after a warm-up. Not a correctness test (tests/runtime/tensor/
// ops) and not the training benchmark (scripts/gpu_check.sh). The step estimate sums the ops
// OpsGpt2Model calls (x/step > 0); rows with x/step 0 are the paths it replaced (fc's separate
// GELU), kept to compare in one run. DS_CUDA_GELU_FUSION=off times the fused rows' fallback.
//   bench_gpu_ops [--device cuda|cpu] [--B 16] [--T 1024] [--C 768] [--NH 12] [--V 50257]
//                 [--Vp 50304] [--L 12] [--dtype bf16|fp16|fp32] [--reps 10]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/knobs.h"
#include "runtime/tensor/ops.h"
#include "runtime/tensor/tensor_knobs.h"

using namespace ds;
using namespace ds::runtime;

namespace {

struct Args {
  std::string device = "cuda", dtype = "bf16";
  int B = 16, T = 1024, C = 768, NH = 12, V = 50257, Vp = 50304, L = 12, reps = 10;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--device") a.device = v;
    else if (k == "--dtype") a.dtype = v;
    else if (k == "--B") a.B = std::stoi(v);
    else if (k == "--T") a.T = std::stoi(v);
    else if (k == "--C") a.C = std::stoi(v);
    else if (k == "--NH") a.NH = std::stoi(v);
    else if (k == "--V") a.V = std::stoi(v);
    else if (k == "--Vp") a.Vp = std::stoi(v);
    else if (k == "--L") a.L = std::stoi(v);
    else if (k == "--reps") a.reps = std::stoi(v);
    else throw ConfigError("bench_gpu_ops: unknown flag " + k);
  }
  return a;
}

double medianMs(Ops& ops, int reps, const std::function<void()>& fn) {
  fn();  // warm-up: module load, cuBLASLt plans
  ops.synchronize();
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    fn();
    ops.synchronize();
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// A device buffer of n elements of `dt` holding small random values (never zeros).
OpsBuffer randomBuffer(Ops& ops, size_t n, DType dt, uint32_t seed, const char* what) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  OpsBuffer buf(ops, n * dtypeSize(dt), what);
  if (dt == DType::kBF16) {
    std::vector<bf16> h(n);
    for (auto& x : h) x = floatToBf16(u(rng));
    ops.upload(buf.get(), h.data(), h.size() * sizeof(bf16));
  } else if (dt == DType::kF16) {  // fp32 up, narrowed on the device (the host's is slow)
    std::vector<float> h(n);
    for (auto& x : h) x = u(rng);
    OpsBuffer wide(ops, n * sizeof(float), "fp16 staging");
    ops.upload(wide.get(), h.data(), h.size() * sizeof(float));
    ops.toFp16(buf.as<fp16>(), wide.as<float>(), n);
    ops.synchronize();
  } else {
    std::vector<float> h(n);
    for (auto& x : h) x = u(rng);
    ops.upload(buf.get(), h.data(), h.size() * sizeof(float));
  }
  return buf;
}

}  // namespace

int main(int argc, char** argv) try {
  Args a = parse(argc, argv);
  a.Vp = std::max(a.Vp, a.V);  // the logits' row width (the model's padded vocabulary)
  auto ops = a.device == "cpu" ? makeCpuOps() : makeCudaOps(0);
  const DType dt = a.dtype == "fp32" ? DType::kF32 : a.dtype == "fp16" ? DType::kF16 : DType::kBF16;
  const size_t BT = size_t(a.B) * a.T, C = size_t(a.C), es = dtypeSize(dt);
  std::printf("bench_gpu_ops on %s: B=%d T=%d C=%d NH=%d V=%d Vp=%d L=%d %s, median of %d\n",
              ops->name().c_str(), a.B, a.T, a.C, a.NH, a.V, a.Vp, a.L, a.dtype.c_str(), a.reps);

  // Copy bandwidth (bytes read + written), the floor of the memory-bound ops.
  const size_t copyBytes = size_t(1) << 30;
  OpsBuffer src = randomBuffer(*ops, copyBytes / 4, DType::kF32, 1, "copy src");
  OpsBuffer dst(*ops, copyBytes, "copy dst");
  const double copyMs = medianMs(*ops, a.reps, [&] { ops->copy(dst.get(), src.get(), copyBytes); });
  const double bw = 2.0 * double(copyBytes) / (copyMs * 1e-3);
  std::printf("copy 1 GiB: %.3f ms, %.0f GB/s (read + write)\n\n", copyMs, bw / 1e9);
  src.reset();
  dst.reset();

  OpsBuffer x = randomBuffer(*ops, BT * 4 * C, dt, 2, "x");
  OpsBuffer y = randomBuffer(*ops, BT * 4 * C, dt, 3, "y");
  OpsBuffer g = randomBuffer(*ops, BT * 4 * C, dt, 4, "g");
  OpsBuffer w = randomBuffer(*ops, size_t(a.Vp) * C, dt, 5, "w");
  OpsBuffer b = randomBuffer(*ops, 4 * C, dt, 6, "b");
  OpsBuffer dw(*ops, size_t(a.Vp) * C * 4, "dw");
  OpsBuffer db(*ops, 4 * C * 4, "db");
  OpsBuffer stats(*ops, BT * 2 * 4, "mean/rstd");
  ops->zero(dw.get(), dw.bytes());
  ops->zero(db.get(), db.bytes());

  struct Row {
    std::string name;
    double ms, perStep, flops, bytes;
  };
  std::vector<Row> rows;
  auto add = [&](std::string name, double perStep, double flops, double bytes,
                 const std::function<void()>& fn) {
    rows.push_back({std::move(name), medianMs(*ops, a.reps, fn), perStep, flops, bytes});
  };
  const double L = a.L;
  struct Lin {
    const char* name;
    size_t cin, cout;
    double count;
  };
  const Lin lins[] = {{"qkv", C, 3 * C, L},
                      {"attproj", C, C, L},
                      {"fc", C, 4 * C, L},
                      {"fcproj", 4 * C, C, L},
                      {"lm_head", C, size_t(a.Vp), 1}};
  for (const Lin& l : lins) {
    const double f = 2.0 * double(BT) * double(l.cin) * double(l.cout);
    const bool head = l.cout == size_t(a.Vp);
    // fc's forward and fcproj's backward run fused with the GELU (rows below); these are the
    // separate products the model used before.
    const bool fwdReplaced = std::strcmp(l.name, "fc") == 0;
    const bool bwdReplaced = std::strcmp(l.name, "fcproj") == 0;
    OpsBuffer out = head ? randomBuffer(*ops, BT * l.cout, dt, 7, "logits") : OpsBuffer();
    void* o = head ? out.get() : y.get();
    add(std::string("matmul fwd ") + l.name, fwdReplaced ? 0 : l.count, f, 0, [&] {
      ops->matmulForward(o, x.get(), w.get(), head ? nullptr : b.get(), int(BT), int(l.cin),
                         int(l.cout), dt);
    });
    // The model writes dinp (matmulBackwardWrite: beta 0, no memset before); the "+=" row is
    // the accumulating call it made before, after a zero() of dinp (x/step 0).
    add(std::string("matmul bwd ") + l.name, bwdReplaced ? 0 : l.count, 2 * f, 0, [&] {
      ops->matmulBackwardWrite(g.get(), dw.as<float>(), head ? nullptr : db.as<float>(), o, x.get(),
                               w.get(), int(BT), int(l.cin), int(l.cout), dt);
    });
    add(std::string("matmul bwd ") + l.name + " +=", 0, 2 * f, 0, [&] {
      ops->zero(g.get(), BT * l.cin * es);
      ops->matmulBackward(g.get(), dw.as<float>(), head ? nullptr : db.as<float>(), o, x.get(),
                          w.get(), int(BT), int(l.cin), int(l.cout), dt);
    });
  }
  {
    const double hs = double(C) / a.NH;
    const double f = 2.0 * a.B * a.NH * double(a.T) * a.T * hs;  // QK^T + PV, causal half
    OpsBuffer qkv = randomBuffer(*ops, BT * 3 * C, dt, 8, "qkv");
    OpsBuffer aux(*ops, ops->attentionAuxBytes(a.B, a.T, a.NH), "aux");
    OpsBuffer dqkv = randomBuffer(*ops, BT * 3 * C, dt, 9, "dqkv");
    add("attention fwd", L, f, 0,
        [&] { ops->attentionForward(y.get(), aux.get(), qkv.get(), a.B, a.T, int(C), a.NH, dt); });
    add("attention bwd", L, 2.5 * f, 0, [&] {
      ops->attentionBackward(dqkv.get(), g.get(), qkv.get(), y.get(), aux.get(), a.B, a.T, int(C),
                             a.NH, dt);
    });
    // Each DS_CUDA_ATTENTION variant side by side (x/step 0: not in the step estimate).
    if (a.device == "cuda") {
      const std::optional<std::string> prev = knobChoice(knobs::kCudaAttention);
      for (const char* path : {"tc3", "tc2", "tc1", "simt"}) {
        ::setenv("DS_CUDA_ATTENTION", path, 1);
        add(std::string("attention fwd ") + path, 0, f, 0, [&] {
          ops->attentionForward(y.get(), aux.get(), qkv.get(), a.B, a.T, int(C), a.NH, dt);
        });
        add(std::string("attention bwd ") + path, 0, 2.5 * f, 0, [&] {
          ops->attentionBackward(dqkv.get(), g.get(), qkv.get(), y.get(), aux.get(), a.B, a.T,
                                 int(C), a.NH, dt);
        });
      }
      if (prev) ::setenv("DS_CUDA_ATTENTION", prev->c_str(), 1);
      else ::unsetenv("DS_CUDA_ATTENTION");
    }
  }
  float* mean = stats.as<float>();
  float* rstd = mean + BT;
  // One LayerNorm per layer runs fused with the residual add before it (ln2), so L + 1 alone.
  add("layernorm fwd", L + 1, 0, double(BT * C * es * 2), [&] {
    ops->layernormForward(y.get(), mean, rstd, x.get(), b.get(), b.get(), int(BT), int(C), dt);
  });
  add("layernorm bwd", 2 * L + 1, 0, double(BT * C * es * 4), [&] {
    ops->layernormBackward(g.get(), db.as<float>(), db.as<float>(), y.get(), x.get(), b.get(), mean,
                           rstd, int(BT), int(C), dt);
  });
  // The previous split LayerNorm backward (DS_CUDA_LAYERNORM_BWD=split: dinp, then dweight/dbias
  // over dout and inp again) beside the fused pass above (x/step 0: not in the step estimate).
  if (a.device == "cuda") {
    const std::optional<std::string> prev = knobChoice(knobs::kCudaLayernormBwd);
    ::setenv("DS_CUDA_LAYERNORM_BWD", "split", 1);
    add("layernorm bwd split", 0, 0, double(BT * C * es * 4), [&] {
      ops->layernormBackward(g.get(), db.as<float>(), db.as<float>(), y.get(), x.get(), b.get(),
                             mean, rstd, int(BT), int(C), dt);
    });
    if (prev) ::setenv("DS_CUDA_LAYERNORM_BWD", prev->c_str(), 1);
    else ::unsetenv("DS_CUDA_LAYERNORM_BWD");
  }
  add("gelu fwd", 0, 0, double(BT * 4 * C * es * 2),
      [&] { ops->geluForward(y.get(), x.get(), BT * 4 * C, dt); });
  add("gelu bwd", 0, 0, double(BT * 4 * C * es * 4),
      [&] { ops->geluBackward(g.get(), x.get(), y.get(), BT * 4 * C, dt); });
  {
    // The fused MLP calls: fc + GELU forward (out and pre-activation), fcproj backward + dGELU.
    const double ffc = 2.0 * double(BT) * double(C) * double(4 * C);
    OpsBuffer pre = randomBuffer(*ops, BT * 4 * C, dt, 13, "pre");
    add("matmul+gelu fwd fc", L, ffc, 0, [&] {
      ops->matmulGeluForward(y.get(), pre.get(), x.get(), w.get(), b.get(), int(BT), int(C),
                             int(4 * C), dt);
    });
    add("matmul+dgelu bwd fcproj", L, 2 * ffc, 0, [&] {
      ops->matmulGeluBackward(g.get(), dw.as<float>(), db.as<float>(), y.get(), x.get(), pre.get(),
                              w.get(), int(BT), int(4 * C), int(C), dt);
    });
  }
  add("residual fwd", L, 0, double(BT * C * es * 3),
      [&] { ops->residualForward(y.get(), x.get(), g.get(), BT * C, dt); });
  {
    OpsBuffer res = randomBuffer(*ops, BT * C, dt, 14, "res");
    add("residual+layernorm fwd", L, 0, double(BT * C * es * 4), [&] {
      ops->residualLayernormForward(res.get(), y.get(), mean, rstd, x.get(), g.get(), b.get(),
                                    b.get(), int(BT), int(C), dt);
    });
  }
  {
    OpsBuffer logits = randomBuffer(*ops, BT * size_t(a.Vp), dt, 10, "logits");
    OpsBuffer losses(*ops, BT * 4, "losses"), lse(*ops, BT * 4, "lse");
    std::vector<int32_t> t(BT);
    for (size_t i = 0; i < BT; ++i) t[i] = int32_t((i * 7919) % size_t(a.V));
    OpsBuffer tg(*ops, BT * 4, "targets");
    ops->upload(tg.get(), t.data(), BT * 4);
    const double lb = double(BT) * a.Vp * double(es);
    // Forward reads the logits once; backward reads them once and writes them once.
    add("cross-entropy fwd", 1, 0, lb, [&] {
      ops->crossEntropyForward(logits.get(), losses.as<float>(), lse.as<float>(), tg.as<int32_t>(),
                               int(BT), a.V, a.Vp, dt);
    });
    // Backward overwrites the logits with dlogits; the forward before each rep restores
    // nothing, so backward times run on dlogits: the same bytes and arithmetic.
    add("cross-entropy bwd", 1, 0, 2 * lb, [&] {
      ops->crossEntropyBackward(logits.get(), lse.as<float>(), tg.as<int32_t>(), int(BT), a.V, a.Vp,
                                1.f, dt);
    });
  }
  {
    const size_t n = size_t(12 * L * double(C) * double(C) + double(a.V) * double(C));
    OpsBuffer p = randomBuffer(*ops, n, DType::kF32, 11, "params");
    OpsBuffer m(*ops, n * 4, "m"), v(*ops, n * 4, "v"), p16(*ops, n * 2, "p16");
    OpsBuffer gr = randomBuffer(*ops, n, DType::kF32, 12, "grads");
    ops->zero(m.get(), m.bytes());
    ops->zero(v.get(), v.bytes());
    DecayRange r{0, n, true};
    AdamStep s;
    add("adamw (all params)", 1, 0, double(n) * (4 * 4 + 4 * 3 + 2), [&] {
      ops->adam(p.as<float>(), m.as<float>(), v.as<float>(), gr.as<float>(), p16.as<bf16>(), &r, 1,
                s);
    });
  }

  std::printf("%-24s %9s %7s %11s %9s %9s\n", "op", "ms", "x/step", "ms/step", "TFLOP/s", "GB/s");
  double total = 0;
  for (const Row& r : rows) {
    const double per = r.ms * r.perStep;
    total += per;
    std::printf("%-24s %9.3f %7.0f %11.2f %9.1f %9.0f\n", r.name.c_str(), r.ms, r.perStep, per,
                r.flops > 0 ? r.flops / (r.ms * 1e-3) / 1e12 : 0.0,
                r.bytes > 0 ? r.bytes / (r.ms * 1e-3) / 1e9 : 0.0);
  }
  std::printf("%-24s %9s %7s %11.2f  (sum of the ops; %.0f tokens/s if nothing else ran)\n",
              "step estimate", "", "", total, double(BT) / (total * 1e-3));
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_gpu_ops: %s\n", e.what());
  return 1;
}
