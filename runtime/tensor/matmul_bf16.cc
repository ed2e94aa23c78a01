// Linear layer on gemmBf16 (see matmul_bf16.h).
#include "runtime/tensor/matmul_bf16.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "runtime/tensor/bf16_convert.h"
#include "runtime/tensor/bf16_gemm.h"
#include "runtime/tensor/matmul.h"
#include "runtime/tensor/tensor_knobs.h"
#include "runtime/tensor/threads.h"

namespace ds::runtime {

namespace {
std::atomic<bool> gEnabled{true};

// The probe shape: rows x in x out of one forward linear product, and its FLOP count.
constexpr int kProbeM = 256, kProbeK = 768, kProbeN = 768;
constexpr double kProbeFlop = 2.0 * kProbeM * kProbeK * kProbeN;

template <class F>
double secondsOf(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

bool bf16LinearNative() {
  return gEnabled.load(std::memory_order_relaxed) && bf16LinearChoice() == Bf16Linear::kNative;
}
void setBf16LinearNative(bool enable) { gEnabled.store(enable); }

const char* bf16LinearName(Bf16Linear path) {
  return path == Bf16Linear::kNative ? "native" : "widen";
}

Bf16Linear pickBf16Linear(const Bf16LinearTiming& t) {
  return t.native < t.widen ? Bf16Linear::kNative : Bf16Linear::kWiden;
}

std::optional<Bf16Linear> bf16LinearForced(const EnvMap& env) {
  const auto v = knobChoice(knobs::kBf16Linear, env);  // DS_BF16_LINEAR
  if (!v || *v == "auto") return std::nullopt;
  return *v == "native" ? Bf16Linear::kNative : Bf16Linear::kWiden;
}

Bf16Linear decideBf16Linear(bool nativeAvailable, const EnvMap& env,
                            const std::function<Bf16LinearTiming()>& measure, bool amx) {
  const auto forced = bf16LinearForced(env);
  if (!nativeAvailable) {
    if (forced == Bf16Linear::kNative) {
      throw NotSupported(
          fmt::format("{}=native: this CPU has no AVX512-BF16", knobs::kBf16Linear.name));
    }
    return Bf16Linear::kWiden;
  }
  if (forced) return *forced;
  if (amx) return Bf16Linear::kNative;
  return pickBf16Linear(measure());
}

Bf16LinearTiming measureBf16Linear() {
  // Without AVX512-BF16 kAuto would widen too: both timings would measure the same path.
  if (!bf16GemmNativeAvailable())
    throw NotSupported("bf16 linear probe: this CPU has no AVX512-BF16, nothing to compare");
  constexpr int M = kProbeM, K = kProbeK, N = kProbeN, kReps = 5;
  std::vector<float> inp(static_cast<size_t>(M) * K), out(static_cast<size_t>(M) * N);
  std::vector<float> wf(static_cast<size_t>(N) * K);
  std::vector<bf16> w(wf.size());
  for (size_t i = 0; i < inp.size(); ++i) inp[i] = static_cast<float>(i % 17) * 0.01f - 0.08f;
  for (size_t i = 0; i < wf.size(); ++i) wf[i] = static_cast<float>(i % 13) * 0.01f - 0.06f;
  f32ToBf16(w.data(), wf.data(), wf.size());
  // What the bf16 model runs per forward linear on each path (gpt2.cc): the native gemm on the
  // bf16 weights, or widening the weights (ParamAccess does it per block entry) plus sgemm.
  auto native = [&] {
    gemmBf16(M, N, K, f32Operand(inp.data(), K, 1), bf16Operand(w.data(), K, 1), out.data(), N,
             0.0f, Bf16GemmPath::kAuto);
  };
  auto widen = [&] {
    bf16ToF32(wf.data(), w.data(), wf.size());
    matmulForward(out.data(), inp.data(), wf.data(), nullptr, M, K, N);
  };
  native();  // warm-up: packing buffers, OpenBLAS and OpenMP threads
  widen();
  Bf16LinearTiming t{1e30, 1e30};
  for (int r = 0; r < kReps; ++r) {
    t.native = std::min(t.native, secondsOf(native));
    t.widen = std::min(t.widen, secondsOf(widen));
  }
  return t;
}

Bf16Linear bf16LinearChoice() {
  static const Bf16Linear choice = [] {
    const bool available = bf16GemmNativeAvailable();
    std::optional<Bf16LinearTiming> timed;
    const bool amx = available && bf16GemmAutoPath() == Bf16GemmPath::kAmx;
    const Bf16Linear c = decideBf16Linear(
        available, currentEnv(),
        [&] {
          timed = measureBf16Linear();
          return *timed;
        },
        amx);
    if (timed) {
      DS_LOG_INFO(
          "tensor",
          "bf16 linear layers: {} (forward 256x768x768, min of 5: native bf16 gemm ({}) "
          "{:.3f} ms = {:.1f} GFLOP/s, widen+sgemm {:.3f} ms = {:.1f} GFLOP/s; {}=native|widen "
          "forces a path)",
          bf16LinearName(c), bf16GemmPathName(bf16GemmAutoPath()), timed->native * 1e3,
          kProbeFlop / timed->native / 1e9, timed->widen * 1e3, kProbeFlop / timed->widen / 1e9,
          knobs::kBf16Linear.name);
    } else if (amx && c == Bf16Linear::kNative) {
      DS_LOG_INFO("tensor",
                  "bf16 linear layers: native on AMX tiles (not measured; {}=widen or "
                  "DS_BF16_GEMM=avx512 change it)",
                  knobs::kBf16Linear.name);
    } else {
      DS_LOG_DEBUG("tensor", "bf16 linear layers: {} ({})", bf16LinearName(c),
                   available ? "forced by DS_BF16_LINEAR" : "no AVX512-BF16");
    }
    return c;
  }();
  return choice;
}

void matmulForwardBf16(float* out, const float* inp, const bf16* weight, const float* bias, int N,
                       int C, int OC) {
  float beta = 0.0f;
  if (bias != nullptr) {
#pragma omp parallel for schedule(static) if (long(N) * OC >= kMinParallelWork)
    for (int n = 0; n < N; ++n) {
      float* row = out + static_cast<size_t>(n) * OC;
      for (int o = 0; o < OC; ++o) row[o] = bias[o];
    }
    beta = 1.0f;
  }
  // out[n, o] = sum_c inp[n, c] * W[o, c]
  gemmBf16(N, OC, C, f32Operand(inp, C, 1), bf16Operand(weight, C, 1), out, OC, beta);
}

void matmulBackwardBf16(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const bf16* weight, int N, int C, int OC) {
  if (dinp != nullptr) {  // dinp[n, c] += sum_o dout[n, o] * W[o, c]
    gemmBf16(N, C, OC, f32Operand(dout, OC, 1), bf16Operand(weight, 1, C), dinp, C, 1.0f);
  }
  if (dweight != nullptr) {  // dW[o, c] += sum_n dout[n, o] * inp[n, c]
    gemmBf16(OC, C, N, f32Operand(dout, 1, OC), f32Operand(inp, 1, C), dweight, C, 1.0f);
  }
  if (dbias != nullptr) {
    matmulBackward(nullptr, nullptr, dbias, dout, inp, nullptr, N, C, OC);
  }
}

}  // namespace ds::runtime
