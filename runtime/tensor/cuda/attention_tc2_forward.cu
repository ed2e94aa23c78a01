// Causal attention forward, bf16 head size 64, second tensor-core version (attention_tc2.h): a
// block per 128-query tile, four warps owning 32 query rows each (two m16 tiles, so every K and V
// fragment read from shared memory feeds two mma), streaming 64-key K/V tiles through a 3-stage
// cp.async ring with one barrier per tile; online softmax in base 2 with MUFU ex2; the causal
// mask only on the tiles that cross a warp's diagonal, tiles wholly past it skipped per warp.
// Not the backward (attention_tc2_backward.cu). Invariant: attention_tc.h's contract.
#include "runtime/tensor/cuda/attention_tc2.h"
#include "runtime/tensor/cuda/attention_tc2_tiles.cuh"
#include "runtime/tensor/cuda/cuda_check.h"

#include <cmath>

namespace ds::runtime::cuda {
namespace {

using namespace tc;
using namespace tc2;

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kMt = 2;                      // m16 tiles per warp
constexpr int kWarpRows = 16 * kMt;         // 32 query rows per warp
constexpr int kQTile = kWarps * kWarpRows;  // 128 queries per block
constexpr int kKTile = 64;                  // keys per K/V tile
constexpr int kStages = 3;                  // K/V ring: load t+1 while t computes, one barrier
constexpr int kKvElems = 2 * kKTile * kLd;  // one stage: K then V
constexpr size_t kSmemBytes = sizeof(uint16_t) * (kQTile * kLd + kStages * kKvElems);
static_assert(kQTile % kKTile == 0, "a query tile ends on a key tile boundary");

// Per-warp state of the online softmax: rows (mt, r) = query wq0 + 16mt + g + 8r.
struct RowState {
  float o[kMt][kHs / 8][4];  // unnormalised output, accumulator layout
  float m[kMt][2];           // running max of scale*log2(e)*S (finite after key tile 0)
  float l[kMt][2];           // this lane's partial sum of 2^(.. - m); quads add up at the end
};

// One 64-key tile for one warp: S = Q K^T, the online softmax update, O += P V. mask: some key
// of the tile lies past some query of the warp (then key > query gets -inf before the max).
// Every row keeps a finite max: key 0 (tile 0) is <= every query, and a later tile's fully
// masked row has mx = -inf, so mNew = m (finite), corr = 1 and its p = ex2(-inf) = 0.
template <class H>
__device__ __forceinline__ void forwardTile(RowState& st, const u32 (&qa)[kMt][kHs / 16][4],
                                            const uint16_t* ks, const uint16_t* vs, bool mask,
                                            int wq0, int k0, float scaleLog2, int lane) {
  const int g = lane / 4, c = lane % 4;
  float s[kMt][kKTile / 8][4];
#pragma unroll
  for (int mt = 0; mt < kMt; ++mt)
#pragma unroll
    for (int n = 0; n < kKTile / 8; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) s[mt][n][i] = 0.f;
        // S = Q K^T: B[d][key] = K[key][d], K's rows by ldmatrix (loadBRows), two m-tiles per load.
#pragma unroll
  for (int n = 0; n < kKTile / 8; ++n) {
    u32 kb[2][4];
    loadBRows(kb[0], ks, 8 * n, 0, lane);
    loadBRows(kb[1], ks, 8 * n, 32, lane);
#pragma unroll
    for (int kd = 0; kd < kHs / 16; ++kd)
#pragma unroll
      for (int mt = 0; mt < kMt; ++mt)
        H::mma(s[mt][n], qa[mt][kd], kb[kd / 2][2 * (kd % 2)], kb[kd / 2][2 * (kd % 2) + 1]);
  }
  if (mask) {
#pragma unroll
    for (int mt = 0; mt < kMt; ++mt)
#pragma unroll
      for (int n = 0; n < kKTile / 8; ++n)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int q = wq0 + 16 * mt + g + 8 * (i / 2), k = k0 + 8 * n + 2 * c + (i % 2);
          if (k > q) s[mt][n][i] = -INFINITY;
        }
  }
#pragma unroll
  for (int mt = 0; mt < kMt; ++mt) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mx = -INFINITY;
#pragma unroll
      for (int n = 0; n < kKTile / 8; ++n)
        mx = fmaxf(mx, fmaxf(s[mt][n][2 * r], s[mt][n][2 * r + 1]));
      const float mNew = fmaxf(st.m[mt][r], quadMax(mx) * scaleLog2);  // scaleLog2 > 0
      const float corr = ex2(st.m[mt][r] - mNew);                      // 0 on tile 0 (m = -inf)
      st.m[mt][r] = mNew;
      float sum = 0.f;
#pragma unroll
      for (int n = 0; n < kKTile / 8; ++n)
#pragma unroll
        for (int i = 2 * r; i < 2 * r + 2; ++i) {
          const float p = ex2(fmaf(s[mt][n][i], scaleLog2, -mNew));
          s[mt][n][i] = p;
          sum += p;
        }
      st.l[mt][r] = st.l[mt][r] * corr + sum;
#pragma unroll
      for (int n = 0; n < kHs / 8; ++n) {
        st.o[mt][n][2 * r] *= corr;
        st.o[mt][n][2 * r + 1] *= corr;
      }
    }
  }
  // O += P V: P's accumulator blocks 2kk, 2kk+1 are the A fragment of keys 16kk..16kk+15; V's B
  // fragments come transposed, each feeding both m-tiles.
#pragma unroll
  for (int kk = 0; kk < kKTile / 16; ++kk) {
    u32 pa[kMt][4];
#pragma unroll
    for (int mt = 0; mt < kMt; ++mt) accToA<H>(pa[mt], s[mt][2 * kk], s[mt][2 * kk + 1]);
#pragma unroll
    for (int j = 0; j < kHs / 16; ++j) {
      u32 vb[4];
      loadBTrans(vb, vs, 16 * kk, 16 * j, lane);
#pragma unroll
      for (int mt = 0; mt < kMt; ++mt) {
        H::mma(st.o[mt][2 * j], pa[mt], vb[0], vb[1]);
        H::mma(st.o[mt][2 * j + 1], pa[mt], vb[2], vb[3]);
      }
    }
  }
}

// Grid (B*NH, numQTiles): blockIdx.x fastest, so every head's longest (last) query tile is
// dispatched before any shorter one. Warp w owns queries q0 + 32w .. q0 + 32w + 31.
template <class H>
__global__ void __launch_bounds__(kThreads, 2)
    attentionTc2ForwardKernel(uint16_t* out, float* lse, const uint16_t* qkv, int T, int C, int NH,
                              float scaleLog2) {
  extern __shared__ __align__(16) uint16_t tc2FwdSmem[];
  uint16_t* qs = tc2FwdSmem;          // [128][kLd] queries
  uint16_t* kvs = qs + kQTile * kLd;  // kStages x {K [64][kLd], V [64][kLd]}
  const int bh = blockIdx.x, b = bh / NH, h = bh % NH;
  const int qt = gridDim.y - 1 - blockIdx.y;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4;
  const int C3 = 3 * C, q0 = qt * kQTile, wq0 = q0 + kWarpRows * warp;
  const uint16_t* base = qkv + static_cast<size_t>(b) * T * C3 + h * kHs;
  // Key tiles up to the block's last query (q0 + 127) and T's last key.
  const int numKeyTiles = min((T + kKTile - 1) / kKTile, (q0 + kQTile) / kKTile);
  auto issueKv = [&](int kt) {
    uint16_t* ks = kvs + (kt % kStages) * kKvElems;
    loadTileAsync<kKTile, kThreads>(ks, base + C, C3, kt * kKTile, T);
    loadTileAsync<kKTile, kThreads>(ks + kKTile * kLd, base + 2 * C, C3, kt * kKTile, T);
  };
  loadTileAsync<kQTile, kThreads>(qs, base, C3, q0, T);
  issueKv(0);
  cpAsyncCommit();  // group 0: Q and K/V tile 0

  RowState st;
#pragma unroll
  for (int mt = 0; mt < kMt; ++mt) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      st.m[mt][r] = -INFINITY;
      st.l[mt][r] = 0.f;
    }
#pragma unroll
    for (int n = 0; n < kHs / 8; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) st.o[mt][n][i] = 0.f;
  }
  u32 qa[kMt][kHs / 16][4];
  for (int kt = 0; kt < numKeyTiles; ++kt) {
    // Ring hazard: the load below writes stage (kt+1)%3, last read for tile kt-2; every warp
    // finished tile kt-2 before passing the barrier of iteration kt-1, which precedes this.
    if (kt + 1 < numKeyTiles) issueKv(kt + 1);
    cpAsyncCommit();   // possibly empty, so that "all but the newest group" is always tile kt
    cpAsyncWait<1>();  // this thread's copies of tile kt (and Q) landed
    __syncthreads();   // ... and everyone else's
    if (kt == 0) {
#pragma unroll
      for (int mt = 0; mt < kMt; ++mt)
#pragma unroll
        for (int kd = 0; kd < kHs / 16; ++kd)
          loadA(qa[mt][kd], qs, kWarpRows * warp + 16 * mt, 16 * kd, lane);
    }
    const int k0 = kt * kKTile;
    if (k0 > wq0 + kWarpRows - 1) continue;  // every key past every query of this warp
    const uint16_t* ks = kvs + (kt % kStages) * kKvElems;
    forwardTile<H>(st, qa, ks, ks + kKTile * kLd, k0 + kKTile - 1 > wq0, wq0, k0, scaleLog2, lane);
  }
  const int c = lane % 4;
#pragma unroll
  for (int mt = 0; mt < kMt; ++mt)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float sum = quadSum(st.l[mt][r]);
      const int t = wq0 + 16 * mt + g + 8 * r;
      if (t >= T) continue;
      const float inv = 1.f / sum;
      uint16_t* row = out + (static_cast<size_t>(b) * T + t) * C + h * kHs;
#pragma unroll
      for (int n = 0; n < kHs / 8; ++n)
        st32(row + 8 * n + 2 * c, H::pack(st.o[mt][n][2 * r] * inv, st.o[mt][n][2 * r + 1] * inv));
      if (c == 0) lse[static_cast<size_t>(bh) * T + t] = (st.m[mt][r] + log2f(sum)) * kLn2;
    }
}

}  // namespace

void attentionTc2Forward(uint16_t* out, float* lse, const uint16_t* qkv, int B, int T, int C,
                         int NH, cudaStream_t stream, bool fp16) {
  auto kernel = fp16 ? attentionTc2ForwardKernel<Fp16> : attentionTc2ForwardKernel<Bf16>;
  DS_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(kSmemBytes)));
  const float scale = 1.0f / std::sqrt(static_cast<float>(kHs));
  dim3 grid(B * NH, (T + kQTile - 1) / kQTile);
  kernel<<<grid, kThreads, kSmemBytes, stream>>>(out, lse, qkv, T, C, NH, scale * kLog2e);
  DS_CUDA_LAUNCHED("attentionTc2ForwardKernel");
}

}  // namespace ds::runtime::cuda
