// Warp-level building blocks of the 16-bit tensor-core kernels (attention_tc2_*.cu): mma.sync
// m16n8k16, ldmatrix, cp.async, bf16/fp16 packing, quad reductions, ex2 and vector fp32 atomics,
// each a thin wrapper over one PTX instruction with its fragment layout written down. Not a GEMM:
// the callers own tiling and shared layouts. Invariant: layouts quoted from the PTX ISA ("Matrix
// Fragments for mma.m16n8k16", "ldmatrix"); g = lane / 4, c = lane % 4 throughout.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

namespace ds::runtime::cuda::tc {

using u32 = uint32_t;

// Two floats rounded (nearest even) to a bf16 pair: lo in bits 0-15, the lower column/k index.
__device__ __forceinline__ u32 packBf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  u32 u;
  memcpy(&u, &v, sizeof(u));
  return u;
}
__device__ __forceinline__ float bf16Lo(u32 u) { return __uint_as_float(u << 16); }
__device__ __forceinline__ float bf16Hi(u32 u) { return __uint_as_float(u & 0xffff0000u); }

__device__ __forceinline__ u32 ld32(const uint16_t* p) { return *reinterpret_cast<const u32*>(p); }
__device__ __forceinline__ void st32(uint16_t* p, u32 v) { *reinterpret_cast<u32*>(p) = v; }

// d += a * b for one m16n8k16 tile: a[0] = A[g][2c..2c+1], a[1] = A[g+8][2c..],
// a[2] = A[g][2c+8..], a[3] = A[g+8][2c+8..]; b0 = B[2c..2c+1][g], b1 = B[2c+8..2c+9][g];
// d[0..1] = D[g][2c..2c+1], d[2..3] = D[g+8][2c..2c+1].
__device__ __forceinline__ void mma(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Four 8x8 bf16 matrices: lanes 8i..8i+7 give the row addresses (16 bytes each) of matrix i.
// Plain: r[i] of lane (g, c) = {M_i[g][2c], M_i[g][2c+1]}.
__device__ __forceinline__ void ldmatrixX4(u32 (&r)[4], const uint16_t* p) {
  const u32 addr = static_cast<u32>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}
// Transposed: r[i] of lane (g, c) = {M_i[2c][g], M_i[2c+1][g]}.
__device__ __forceinline__ void ldmatrixX4Trans(u32 (&r)[4], const uint16_t* p) {
  const u32 addr = static_cast<u32>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

// 16 bytes global -> shared without registers; valid false zero-fills (src-size 0 reads nothing,
// but src must still be a mapped address: callers pass a clamped row).
__device__ __forceinline__ void cpAsync16(void* dst, const void* src, bool valid) {
  const u32 addr = static_cast<u32>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(addr), "l"(src),
               "r"(valid ? 16 : 0)
               : "memory");
}
// 4 bytes, the same contract (for float rows whose start is only 4-byte aligned).
__device__ __forceinline__ void cpAsync4(void* dst, const void* src, bool valid) {
  const u32 addr = static_cast<u32>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(addr), "l"(src),
               "r"(valid ? 4 : 0)
               : "memory");
}
// Closes this thread's group of cp.async issued since the last commit (an empty group is legal).
__device__ __forceinline__ void cpAsyncCommit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
// Waits until at most N of this thread's committed groups are pending. Other threads' copies are
// visible only after a barrier that follows.
template <int N>
__device__ __forceinline__ void cpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// The two 16-bit formats the tc2/tc3 attention kernels take, as a template argument: each names
// its mma (fp32 accumulation either way) and how two floats pack into and out of a 32-bit pair
// (lo in bits 0-15). The shared-memory layouts and ldmatrix are the same (16-bit elements).
struct Bf16 {
  static __device__ __forceinline__ u32 pack(float lo, float hi) { return packBf16(lo, hi); }
  static __device__ __forceinline__ float lo(u32 u) { return bf16Lo(u); }
  static __device__ __forceinline__ float hi(u32 u) { return bf16Hi(u); }
  static __device__ __forceinline__ void mma(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
    tc::mma(d, a, b0, b1);
  }
};
struct Fp16 {
  static __device__ __forceinline__ u32 pack(float lo, float hi) {
    const __half2 v = __floats2half2_rn(lo, hi);
    u32 u;
    memcpy(&u, &v, sizeof(u));
    return u;
  }
  static __device__ __forceinline__ float lo(u32 u) {
    return __half2float(__ushort_as_half(static_cast<unsigned short>(u & 0xffffu)));
  }
  static __device__ __forceinline__ float hi(u32 u) {
    return __half2float(__ushort_as_half(static_cast<unsigned short>(u >> 16)));
  }
  static __device__ __forceinline__ void mma(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

// 2^x, one MUFU.EX2 (ex2.approx: about 2 ulp; ex2(-inf) = +0, which the masks rely on).
__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Max / sum over the four lanes (c = 0..3) that share a fragment row.
__device__ __forceinline__ float quadMax(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quadSum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// p[0] += a, p[1] += b atomically; p 8-byte aligned. One vector reduction on sm_90
// (red.global.add.v2.f32), two scalar atomics before.
__device__ __forceinline__ void atomicAddF32x2(float* p, float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("red.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(p), "f"(a), "f"(b) : "memory");
#else
  atomicAdd(p, a);
  atomicAdd(p + 1, b);
#endif
}

}  // namespace ds::runtime::cuda::tc
