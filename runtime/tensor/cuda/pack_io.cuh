// Pack<E, W>: W consecutive elements of fp32, bf16 or fp16 storage moved as one aligned access (W *
// sizeof(E) = 16 bytes is a 128-bit load/store), widened to and narrowed from fp32 with
// element_io.cuh's rounding. Not a bounds check: callers guarantee alignment and extent.
// Invariant: W = 1 is the plain scalar path, so one kernel template serves both.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/tensor/cuda/element_io.cuh"

namespace ds::runtime::cuda {

// One element to and from fp32: float, bf16, fp16, or uint16_t holding bf16 bits (kernels.h's
// dispatchStorage types).
__device__ __forceinline__ float toF32(float e) { return e; }
__device__ __forceinline__ float toF32(bf16 e) { return loadF(&e); }
__device__ __forceinline__ float toF32(fp16 e) { return loadF(&e); }
__device__ __forceinline__ float toF32(uint16_t e) { return math::bf16BitsToF32(e); }
__device__ __forceinline__ void fromF32(float& e, float x) { e = x; }
__device__ __forceinline__ void fromF32(bf16& e, float x) { storeF(&e, x); }
__device__ __forceinline__ void fromF32(fp16& e, float x) { storeF(&e, x); }
__device__ __forceinline__ void fromF32(uint16_t& e, float x) { e = math::f32ToBf16Bits(x); }

// Elements of E in 16 bytes (4 fp32, 8 bf16 or fp16).
template <class E>
inline constexpr int kPack16 = static_cast<int>(16 / sizeof(E));

template <class E, int W>
struct alignas(sizeof(E) * W) Pack {
  E v[W];
};

template <class E, int W>
__device__ __forceinline__ void loadPack(const E* p, float (&x)[W]) {
  const Pack<E, W> pk = *reinterpret_cast<const Pack<E, W>*>(p);
#pragma unroll
  for (int i = 0; i < W; ++i) x[i] = toF32(pk.v[i]);
}

template <class E, int W>
__device__ __forceinline__ void storePack(E* p, const float (&x)[W]) {
  Pack<E, W> pk;
#pragma unroll
  for (int i = 0; i < W; ++i) fromF32(pk.v[i], x[i]);
  *reinterpret_cast<Pack<E, W>*>(p) = pk;
}

}  // namespace ds::runtime::cuda
