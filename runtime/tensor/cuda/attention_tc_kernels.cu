// Causal attention for bf16 storage and head size 64 on tensor cores (mma.sync m16n8k16 bf16,
// fp32 accumulators), FlashAttention-2's schedule: forward, a block per 64-query tile whose four
// warps own 16 query rows each, streaming 64-key K/V tiles with an online softmax in registers;
// backward, a block per 64-key tile recomputing P from the saved lse. Not the fp32 or other head
// size path (attention_kernels.cu's SIMT kernels, also the reference). Invariant: bf16 operands,
// fp32 accumulation; aux = ln(sum exp(scale * S)) per query row, as the SIMT kernels write it.
#include "runtime/tensor/cuda/attention_tc.h"
#include "runtime/tensor/cuda/cuda_check.h"

#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>
#include <cstring>

namespace ds::runtime::cuda {
namespace {

constexpr int kHs = kAttentionTcHeadSize;
constexpr int kTile = 64;      // queries per forward block, keys per backward block and K/V tile
constexpr int kThreads = 128;  // four warps, each owning 16 rows of the block's tile
constexpr int kLd = kHs + 8;   // shared row stride in bf16: 144 bytes, so that the 8 rows of an
                               // ldmatrix and the 8 groups of a 32-bit fragment load hit
                               // distinct banks
constexpr int kTileElems = kTile * kLd;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

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

// d += a * b for one m16n8k16 tile (PTX ISA "Matrix Fragments for mma.m16n8k16", g = lane / 4,
// c = lane % 4): a[0] = A[g][2c..2c+1], a[1] = A[g+8][2c..], a[2] = A[g][2c+8..],
// a[3] = A[g+8][2c+8..]; b0 = B[2c..2c+1][g], b1 = B[2c+8..2c+9][g];
// d[0..1] = D[g][2c..2c+1], d[2..3] = D[g+8][2c..2c+1].
__device__ __forceinline__ void mma(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Four transposed 8x8 bf16 matrices: lanes 8i..8i+7 give the row addresses of matrix i, and
// r[i] of lane (g, c) = {M_i[2c][g], M_i[2c+1][g]}.
__device__ __forceinline__ void ldmatrixX4Trans(u32 (&r)[4], const uint16_t* p) {
  const u32 addr = static_cast<u32>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

// The B fragments of a 16 x 16 block of a row-major [k][n] tile (rows k0.., columns n0..): with
// lane l addressing row k0 + l%8 + 8*((l/8)%2), column n0 + 8*(l/16), r[0], r[1] are b0, b1 of
// columns n0..n0+7 and r[2], r[3] those of n0+8..n0+15.
__device__ __forceinline__ void loadBTrans(u32 (&r)[4], const uint16_t* tile, int k0, int n0,
                                           int lane) {
  ldmatrixX4Trans(r, tile + (k0 + lane % 8 + 8 * ((lane / 8) % 2)) * kLd + n0 + 8 * (lane / 16));
}

// The A fragment of rows m0..m0+15, k columns k0..k0+15 of a row-major [m][k] tile.
__device__ __forceinline__ void loadA(u32 (&a)[4], const uint16_t* tile, int m0, int k0, int g,
                                      int c) {
  const uint16_t* p = tile + (m0 + g) * kLd + k0 + 2 * c;
  a[0] = ld32(p);
  a[1] = ld32(p + 8 * kLd);
  a[2] = ld32(p + 8);
  a[3] = ld32(p + 8 * kLd + 8);
}

// dst[r][0..63] = src[(row0 + r) * ld + 0..63] for r < 64; rows at or past T are zeros.
__device__ __forceinline__ void loadTile(uint16_t* dst, const uint16_t* src, int ld, int row0,
                                         int T) {
  constexpr int kChunks = kHs / 8;  // 16-byte chunks per row
  for (int e = threadIdx.x; e < kTile * kChunks; e += kThreads) {
    const int r = e / kChunks, col = (e % kChunks) * 8, t = row0 + r;
    uint4 v = make_uint4(0u, 0u, 0u, 0u);
    if (t < T) v = *reinterpret_cast<const uint4*>(src + static_cast<size_t>(t) * ld + col);
    *reinterpret_cast<uint4*>(dst + r * kLd + col) = v;
  }
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

// Grid (numTiles, B*NH). Warp w owns tile rows 16w..16w+15; lane (g, c) the rows 16w+g and
// 16w+g+8 (r = 0, 1) and, per 8-column block n, columns 8n+2c and 8n+2c+1.
__global__ void __launch_bounds__(kThreads)
    attentionTcForwardKernel(uint16_t* out, float* lse, const uint16_t* qkv, int T, int C, int NH,
                             float scaleLog2) {
  extern __shared__ __align__(16) uint16_t tcFwdSmem[];
  uint16_t* qs = tcFwdSmem;                   // [64][kLd] queries
  uint16_t* ks = qs + kTileElems;             // [64][kLd] keys
  uint16_t* vs = ks + kTileElems;             // [64][kLd] values
  const int qt = gridDim.x - 1 - blockIdx.x;  // the long (late) query tiles start first
  const int bh = blockIdx.y, b = bh / NH, h = bh % NH;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
  const int wr = 16 * warp, C3 = 3 * C, q0 = qt * kTile;
  const uint16_t* base = qkv + static_cast<size_t>(b) * T * C3 + h * kHs;
  loadTile(qs, base, C3, q0, T);
  __syncthreads();
  u32 qa[kHs / 16][4];
#pragma unroll
  for (int kd = 0; kd < kHs / 16; ++kd) loadA(qa[kd], qs, wr, 16 * kd, g, c);

  float o[kHs / 8][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
#pragma unroll
  for (int n = 0; n < kHs / 8; ++n)
#pragma unroll
    for (int i = 0; i < 4; ++i) o[n][i] = 0.f;

  for (int kt = 0; kt <= qt; ++kt) {
    __syncthreads();  // the previous tile's readers of ks, vs are done
    loadTile(ks, base + C, C3, kt * kTile, T);
    loadTile(vs, base + 2 * C, C3, kt * kTile, T);
    __syncthreads();
    // S = Q K^T: B[d][key] = K[key][d], so b0/b1 are 32-bit loads along a key row.
    float s[kTile / 8][4];
#pragma unroll
    for (int n = 0; n < kTile / 8; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) s[n][i] = 0.f;
#pragma unroll
    for (int kd = 0; kd < kHs / 16; ++kd)
#pragma unroll
      for (int n = 0; n < kTile / 8; ++n) {
        const uint16_t* kp = ks + (8 * n + g) * kLd + 16 * kd + 2 * c;
        mma(s[n], qa[kd], ld32(kp), ld32(kp + 8));
      }
    // Online softmax in base 2. On the diagonal tile keys past the query are masked; key column
    // 0 never is, so every row's max (over its quad) is finite. Keys at or past T only occur on
    // the diagonal tile of the last query tile, past every valid query: masked too.
    const bool diag = kt == qt;
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < kTile / 8; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int row = wr + g + 8 * (i / 2), col = 8 * n + 2 * c + (i % 2);
        const float v = (diag && col > row) ? -INFINITY : s[n][i] * scaleLog2;
        s[n][i] = v;
        mx[i / 2] = fmaxf(mx[i / 2], v);
      }
    float corr[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float mNew = fmaxf(m[r], quadMax(mx[r]));
      corr[r] = exp2f(m[r] - mNew);  // 0 on the first tile (m = -inf)
      m[r] = mNew;
      l[r] *= corr[r];  // this lane's partial row sum; the quad's are added at the end
    }
#pragma unroll
    for (int n = 0; n < kTile / 8; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float p = exp2f(s[n][i] - m[i / 2]);
        s[n][i] = p;
        l[i / 2] += p;
      }
#pragma unroll
    for (int n = 0; n < kHs / 8; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) o[n][i] *= corr[i / 2];
        // O += P V: P's accumulator fragments of key blocks 2kk, 2kk+1 are the A fragment of keys
        // 16kk..16kk+15; V's B fragments come transposed by ldmatrix.
#pragma unroll
    for (int kk = 0; kk < kTile / 16; ++kk) {
      const u32 pa[4] = {packBf16(s[2 * kk][0], s[2 * kk][1]), packBf16(s[2 * kk][2], s[2 * kk][3]),
                         packBf16(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                         packBf16(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int j = 0; j < kHs / 16; ++j) {
        u32 vb[4];
        loadBTrans(vb, vs, 16 * kk, 16 * j, lane);
        mma(o[2 * j], pa, vb[0], vb[1]);
        mma(o[2 * j + 1], pa, vb[2], vb[3]);
      }
    }
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float sum = quadSum(l[r]);
    const int t = q0 + wr + g + 8 * r;
    if (t >= T) continue;
    const float inv = 1.f / sum;
    uint16_t* row = out + (static_cast<size_t>(b) * T + t) * C + h * kHs;
#pragma unroll
    for (int n = 0; n < kHs / 8; ++n)
      st32(row + 8 * n + 2 * c, packBf16(o[n][2 * r] * inv, o[n][2 * r + 1] * inv));
    if (c == 0) lse[static_cast<size_t>(bh) * T + t] = (m[r] + log2f(sum)) * kLn2;
  }
}

// *p (a bf16 pair) += (lo, hi), rounded to nearest even.
__device__ __forceinline__ void addBf16x2(uint16_t* p, float lo, float hi) {
  const u32 old = ld32(p);
  st32(p, packBf16(bf16Lo(old) + lo, bf16Hi(old) + hi));
}

// Grid (numTiles, B*NH): one 64-key tile per block, looping over the query tiles at or after it.
// Warp w owns key rows 16w..16w+15 of S^T = K Q^T and dP^T = V dO^T (lane (g, c): keys 16w+g,
// 16w+g+8; query columns 8n+2c, 8n+2c+1), hence of dK and dV, which stay in registers. dQ needs
// all 64 keys: dS^T goes through shared memory and warp w computes query rows 16w..16w+15 of
// dS K, added to dq by fp32 atomics.
__global__ void __launch_bounds__(kThreads)
    attentionTcBackwardKernel(uint16_t* dqkv, float* dq, const uint16_t* dout, const uint16_t* qkv,
                              const float* lse, const float* dsum, int T, int C, int NH,
                              float scale, float scaleLog2) {
  extern __shared__ __align__(16) uint16_t tcBwdSmem[];
  uint16_t* ks = tcBwdSmem;         // [64][kLd] keys of this block
  uint16_t* vs = ks + kTileElems;   // [64][kLd] values of this block
  uint16_t* qs = vs + kTileElems;   // [64][kLd] queries of the current query tile
  uint16_t* gs = qs + kTileElems;   // [64][kLd] dout of the current query tile
  uint16_t* dst = gs + kTileElems;  // [64 keys][kLd] dS^T * scale
  float* lses = reinterpret_cast<float*>(dst + kTileElems);  // [64] lse * log2(e)
  float* dsums = lses + kTile;                               // [64] D
  const int kt = blockIdx.x, numTiles = gridDim.x;           // key tile 0 has the most work: first
  const int bh = blockIdx.y, b = bh / NH, h = bh % NH;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
  const int wr = 16 * warp, C3 = 3 * C, k0 = kt * kTile;
  const uint16_t* base = qkv + static_cast<size_t>(b) * T * C3 + h * kHs;
  const uint16_t* gbase = dout + static_cast<size_t>(b) * T * C + h * kHs;
  loadTile(ks, base + C, C3, k0, T);
  loadTile(vs, base + 2 * C, C3, k0, T);

  float dk[kHs / 8][4], dv[kHs / 8][4];
#pragma unroll
  for (int n = 0; n < kHs / 8; ++n)
#pragma unroll
    for (int i = 0; i < 4; ++i) dk[n][i] = dv[n][i] = 0.f;

  for (int qt = kt; qt < numTiles; ++qt) {
    const int q0 = qt * kTile;
    __syncthreads();  // the previous query tile's readers of qs, gs, dst, lses, dsums are done
    loadTile(qs, base, C3, q0, T);
    loadTile(gs, gbase, C, q0, T);
    if (threadIdx.x < kTile) {
      const int t = q0 + threadIdx.x;
      const size_t at = static_cast<size_t>(bh) * T + t;
      lses[threadIdx.x] = t < T ? lse[at] * kLog2e : 0.f;
      dsums[threadIdx.x] = t < T ? dsum[at] : 0.f;
    }
    __syncthreads();
    // S^T = K Q^T and dP^T = V dO^T: B[d][query] = Q[query][d], 32-bit loads along a query row.
    float st[kTile / 8][4], dpt[kTile / 8][4];
#pragma unroll
    for (int n = 0; n < kTile / 8; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) st[n][i] = dpt[n][i] = 0.f;
#pragma unroll
    for (int kd = 0; kd < kHs / 16; ++kd) {
      u32 ka[4], va[4];
      loadA(ka, ks, wr, 16 * kd, g, c);
      loadA(va, vs, wr, 16 * kd, g, c);
#pragma unroll
      for (int n = 0; n < kTile / 8; ++n) {
        const int at = (8 * n + g) * kLd + 16 * kd + 2 * c;
        mma(st[n], ka, ld32(qs + at), ld32(qs + at + 8));
        mma(dpt[n], va, ld32(gs + at), ld32(gs + at + 8));
      }
    }
    // P^T = exp(scale*S - lse) where key <= query < T, else 0 (tail keys are past every valid
    // query); dS^T = P^T * (dP^T - D) * scale.
#pragma unroll
    for (int n = 0; n < kTile / 8; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int kr = wr + g + 8 * (i / 2), qc = 8 * n + 2 * c + (i % 2);
        const int tk = k0 + kr, tq = q0 + qc;
        const float p = (tq < T && tk <= tq) ? exp2f(st[n][i] * scaleLog2 - lses[qc]) : 0.f;
        st[n][i] = p;
        dpt[n][i] = p * (dpt[n][i] - dsums[qc]) * scale;
      }
      // dV += P^T dO and dK += dS^T Q: the accumulator fragments of query blocks 2kq, 2kq+1 are
      // the A fragment of queries 16kq..16kq+15; dO's and Q's B fragments come transposed.
#pragma unroll
    for (int kq = 0; kq < kTile / 16; ++kq) {
      const u32 pa[4] = {packBf16(st[2 * kq][0], st[2 * kq][1]),
                         packBf16(st[2 * kq][2], st[2 * kq][3]),
                         packBf16(st[2 * kq + 1][0], st[2 * kq + 1][1]),
                         packBf16(st[2 * kq + 1][2], st[2 * kq + 1][3])};
      const u32 da[4] = {packBf16(dpt[2 * kq][0], dpt[2 * kq][1]),
                         packBf16(dpt[2 * kq][2], dpt[2 * kq][3]),
                         packBf16(dpt[2 * kq + 1][0], dpt[2 * kq + 1][1]),
                         packBf16(dpt[2 * kq + 1][2], dpt[2 * kq + 1][3])};
#pragma unroll
      for (int j = 0; j < kHs / 16; ++j) {
        u32 gb[4], qb[4];
        loadBTrans(gb, gs, 16 * kq, 16 * j, lane);
        mma(dv[2 * j], pa, gb[0], gb[1]);
        mma(dv[2 * j + 1], pa, gb[2], gb[3]);
        loadBTrans(qb, qs, 16 * kq, 16 * j, lane);
        mma(dk[2 * j], da, qb[0], qb[1]);
        mma(dk[2 * j + 1], da, qb[2], qb[3]);
      }
    }
    // dS^T (bf16, as the tensor cores will read it) to shared memory: dst[key][query].
#pragma unroll
    for (int n = 0; n < kTile / 8; ++n)
#pragma unroll
      for (int r = 0; r < 2; ++r)
        st32(dst + (wr + g + 8 * r) * kLd + 8 * n + 2 * c,
             packBf16(dpt[n][2 * r], dpt[n][2 * r + 1]));
    __syncthreads();
    // dQ rows 16w.. = dS K. A[query][key] = dst[key][query]: transposed 8x8 loads, matrix i
    // (lanes 8i..8i+7) at keys 16kk + 8*(i/2) + l%8, queries 16w + 8*(i%2), gives a[i].
    // B[key][d] = K[key][d]: transposed like V in the forward.
    float dqa[kHs / 8][4];
#pragma unroll
    for (int n = 0; n < kHs / 8; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) dqa[n][i] = 0.f;
#pragma unroll
    for (int kk = 0; kk < kTile / 16; ++kk) {
      u32 sa[4];
      ldmatrixX4Trans(
          sa, dst + (16 * kk + 8 * (lane / 16) + lane % 8) * kLd + wr + 8 * ((lane / 8) % 2));
#pragma unroll
      for (int j = 0; j < kHs / 16; ++j) {
        u32 kb[4];
        loadBTrans(kb, ks, 16 * kk, 16 * j, lane);
        mma(dqa[2 * j], sa, kb[0], kb[1]);
        mma(dqa[2 * j + 1], sa, kb[2], kb[3]);
      }
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int t = q0 + wr + g + 8 * r;
      if (t >= T) continue;
      float* row = dq + (static_cast<size_t>(b) * T + t) * C + h * kHs;
#pragma unroll
      for (int n = 0; n < kHs / 8; ++n) {
        atomicAdd(row + 8 * n + 2 * c, dqa[n][2 * r]);
        atomicAdd(row + 8 * n + 2 * c + 1, dqa[n][2 * r + 1]);
      }
    }
  }
  // This block is the only writer of its keys' dK, dV columns: plain read-add-write.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int t = k0 + wr + g + 8 * r;
    if (t >= T) continue;
    uint16_t* row = dqkv + (static_cast<size_t>(b) * T + t) * C3 + h * kHs;
#pragma unroll
    for (int n = 0; n < kHs / 8; ++n) {
      const int d = 8 * n + 2 * c;
      addBf16x2(row + C + d, dk[n][2 * r], dk[n][2 * r + 1]);
      addBf16x2(row + 2 * C + d, dv[n][2 * r], dv[n][2 * r + 1]);
    }
  }
}

constexpr size_t kForwardSmem = sizeof(uint16_t) * 3 * kTileElems;
constexpr size_t kBackwardSmem = sizeof(uint16_t) * 5 * kTileElems + sizeof(float) * 2 * kTile;

bool aligned(const void* p, uintptr_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

}  // namespace

bool attentionTcSupported(int hs, const void* qkv, const void* out, const void* dout,
                          const void* dqkv) {
  return hs == kHs && aligned(qkv, 16) && aligned(dout, 16) && aligned(out, 4) && aligned(dqkv, 4);
}

void attentionTcForward(uint16_t* out, float* lse, const uint16_t* qkv, int B, int T, int C, int NH,
                        cudaStream_t stream) {
  DS_CUDA_CHECK(cudaFuncSetAttribute(attentionTcForwardKernel,
                                     cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(kForwardSmem)));
  const float scale = 1.0f / std::sqrt(static_cast<float>(kHs));
  dim3 grid((T + kTile - 1) / kTile, B * NH);
  attentionTcForwardKernel<<<grid, kThreads, kForwardSmem, stream>>>(out, lse, qkv, T, C, NH,
                                                                     scale * kLog2e);
  DS_CUDA_LAUNCHED("attentionTcForwardKernel");
}

void attentionTcBackward(uint16_t* dqkv, float* dq, const uint16_t* dout, const uint16_t* qkv,
                         const float* lse, const float* dsum, int B, int T, int C, int NH,
                         cudaStream_t stream) {
  DS_CUDA_CHECK(cudaFuncSetAttribute(attentionTcBackwardKernel,
                                     cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(kBackwardSmem)));
  const float scale = 1.0f / std::sqrt(static_cast<float>(kHs));
  dim3 grid((T + kTile - 1) / kTile, B * NH);
  attentionTcBackwardKernel<<<grid, kThreads, kBackwardSmem, stream>>>(
      dqkv, dq, dout, qkv, lse, dsum, T, C, NH, scale, scale * kLog2e);
  DS_CUDA_LAUNCHED("attentionTcBackwardKernel");
}

}  // namespace ds::runtime::cuda
