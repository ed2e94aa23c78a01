// Linear layer on the native bf16 gemm (bf16_gemm.h): the same contract as matmul.h (forward
// out = inp . W^T + bias; backward ACCUMULATES into dinp, dweight, dbias) with W given as bf16 and
// inp/dout rounded to bf16 inside the gemm; products and sums fp32, dbias from fp32 dout.
// Routing (bf16LinearNative): measured once per process. The native AVX512-BF16 kernel was 2.5-3.8x
// "widen W + OpenBLAS sgemm" on an AMD EPYC (Zen 4) but 0.57x on an Intel Xeon (OpenBLAS SkylakeX
// sgemm 178 vs native 101 GFLOP/s), so on a CPU with AVX512-BF16 the first call times both paths
// on one forward linear shape and keeps the faster; DS_BF16_LINEAR forces either.
#pragma once

#include <functional>
#include <optional>

#include "core/dtype.h"
#include "core/env.h"

namespace ds::runtime {

// True when the bf16 model should run its linear layers here instead of widen + sgemm: the
// process's choice (bf16LinearChoice) is native and no one called setBf16LinearNative(false).
bool bf16LinearNative();
// Process-wide switch for A/B measurements and tests (default on; off forces widen + sgemm, on
// follows the process's choice).
void setBf16LinearNative(bool enable);

enum class Bf16Linear { kNative, kWiden };
const char* bf16LinearName(Bf16Linear path);  // "native" | "widen"

// Seconds per forward linear product on each path (min over interleaved reps).
struct Bf16LinearTiming {
  double native = 0.0, widen = 0.0;
};

// The pure choice: native only when strictly faster (widen is the portable path).
Bf16Linear pickBf16Linear(const Bf16LinearTiming& t);
// DS_BF16_LINEAR=auto|native|widen (default auto): the path to force, nullopt for auto; any other
// value is a ConfigError.
std::optional<Bf16Linear> bf16LinearForced(const EnvMap& env);
// The decision: widen without AVX512-BF16 (forcing native there is NotSupported); else the forced
// path; else native when the gemm runs on AMX (amx: its tiles do many times sgemm's FLOPs per
// cycle, 197 vs 26 GFLOP/s on the probe; a probe on a loaded machine once picked widen); else
// pickBf16Linear(measure()). measure runs only in that last case.
Bf16Linear decideBf16Linear(bool nativeAvailable, const EnvMap& env,
                            const std::function<Bf16LinearTiming()>& measure, bool amx = false);
// Times both paths on M=256, K=N=768 (GPT-2 small attention projection): one warm-up and 5
// interleaved reps each, about 20-50 ms in all on the current OpenMP/OpenBLAS threads.
// NotSupported on a CPU without AVX512-BF16 (there is only the widening path).
Bf16LinearTiming measureBf16Linear();
// decideBf16Linear for this CPU, environment and measureBf16Linear, made once per process
// (thread-safe) and logged at info level with both timings when measured.
Bf16Linear bf16LinearChoice();

void matmulForwardBf16(float* out, const float* inp, const bf16* weight, const float* bias, int N,
                       int C, int OC);
void matmulBackwardBf16(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const bf16* weight, int N, int C, int OC);

}  // namespace ds::runtime
