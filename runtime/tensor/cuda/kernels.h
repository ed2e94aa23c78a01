// Launchers shared between the files of runtime/tensor/cuda (host-callable, defined in .cu
// files). Not part of the Ops interface; each enqueues on the given stream and checks the launch.
// Invariant: every reduction here has a fixed grid and summation order (deterministic).
#pragma once

#include <cuda_runtime.h>

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "core/error.h"

namespace ds::runtime::cuda {

inline constexpr int kThreads = 256;  // block size of the elementwise and reduction kernels

// Whether p is 16-byte aligned (the 128-bit pack path's precondition, pack_io.cuh).
inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Blocks for a grid-stride loop over n elements (capped; the loop covers the rest).
inline unsigned gridFor(size_t n) {
  const size_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < (size_t{1} << 20) ? (blocks ? blocks : 1) : (1u << 20));
}

// Calls f(T{}) with T the storage type of dt: float for kF32, uint16_t (bf16 bits) for kBF16,
// ds::fp16 for kF16 (a distinct type, so bf16-only fast paths that test for uint16_t skip it);
// any other type is NotSupported naming the op.
template <class F>
void dispatchStorage(DType dt, const char* op, F&& f) {
  switch (dt) {
    case DType::kF32: f(float{}); return;
    case DType::kBF16: f(uint16_t{}); return;
    case DType::kF16: f(fp16{}); return;
    default:
      throw NotSupported(
          fmt::format("cuda {}: element type {} (only fp32, bf16 and fp16)", op, dtypeName(dt)));
  }
}

// dst[c] += sum over rows n of src[n, c], src [N, C] of dt (kF32, kBF16 or kF16), dst fp32.
// partials: scratch of columnSumScratchBytes(N, C) bytes.
size_t columnSumScratchBytes(int N, int C);
void launchColumnSumAdd(float* dst, const void* src, int N, int C, DType dt, void* partials,
                        cudaStream_t stream);
// out[n, c] += bias[c] for out [N, C] of dt (bias also dt).
void launchAddBias(void* out, const void* bias, int N, int C, DType dt, cudaStream_t stream);

// The vectorised LayerNorm forward (layernorm_fwd_vec_kernels.cu): out = LayerNorm(a) or, with b,
// res = a + b and out = LayerNorm(res); mean/rstd [N] fp32. Returns false (launching nothing)
// where it does not apply: C not a whole number (1..8) of warp-wide 128-bit packs, a pointer not
// 16-byte aligned, dt not fp32/bf16.
bool launchLayernormForwardVec(void* res, void* out, float* mean, float* rstd, const void* a,
                               const void* b, const void* weight, const void* bias, int N, int C,
                               DType dt, cudaStream_t stream);

// d[i] = gelu'(pre[i]) * d[i] for d, pre of dt (kF32, kBF16 or kF16): GELU's backward, written in
// place.
void launchGeluGradScale(void* d, const void* pre, size_t n, DType dt, cudaStream_t stream);

}  // namespace ds::runtime::cuda
