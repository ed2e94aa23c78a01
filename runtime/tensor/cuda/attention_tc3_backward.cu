// Causal attention backward, bf16 head size 64, third tensor-core version (attention_tc3.h):
// attention_tc2_backward.cu's blocks (one per 64-key tile, four warps of 16 keys, a 2-stage
// cp.async ring of 64-query tiles, dQ by vector fp32 atomics) with each query tile computed in
// two 32-query halves: 32 score/dP registers live instead of 64, so that it fits 168 registers
// and 3 blocks (12 warps) per SM instead of 2. Not the
// forward nor D = rowsum(dO * O). Invariant: attention_tc.h's contract; dS carries the softmax
// scale before its bf16 rounding.
#include "runtime/tensor/cuda/attention_tc2_tiles.cuh"
#include "runtime/tensor/cuda/attention_tc3.h"
#include "runtime/tensor/cuda/cuda_check.h"

#include <cmath>

namespace ds::runtime::cuda {
namespace {

using namespace tc;
using namespace tc2;

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kTile = 64;                    // keys per block, queries per streamed tile
constexpr int kHalf = kTile / 2;             // queries per scores pass
constexpr int kBlocksPerSm = 3;              // 3 x 65.5 KiB shared, <= 170 registers
constexpr int kStages = 2;                   // query ring: load t+1 while t computes
constexpr int kTileElems = kTile * kLd;      // one [64][kLd] bf16 tile
constexpr int kStageElems = 2 * kTileElems;  // Q then dO
// Shared: K, V, dS^T, the Q/dO ring (bf16), then the lse/D ring (fp32, [64] each).
constexpr size_t kSmemBytes = sizeof(uint16_t) * (3 * kTileElems + kStages * kStageElems) +
                              sizeof(float) * kStages * 2 * kTile;

// Issues the loads of query tile qt into ring stage `stage`: Q and dO rows (zero past T) and
// lse, D (zero past T; 4-byte copies since bh*T + q0 need not be a multiple of 4).
__device__ __forceinline__ void issueQueryTile(uint16_t* ring, float* fring, int stage,
                                               const uint16_t* qbase, const uint16_t* gbase,
                                               const float* lseRow, const float* dsumRow, int qt,
                                               int T, int C) {
  uint16_t* qs = ring + stage * kStageElems;
  const int q0 = qt * kTile;
  loadTileAsync<kTile, kThreads>(qs, qbase, 3 * C, q0, T);
  loadTileAsync<kTile, kThreads>(qs + kTileElems, gbase, C, q0, T);
  static_assert(kThreads == 2 * kTile, "one float of lse or D per thread");
  const int i = threadIdx.x % kTile, t = q0 + i;
  const bool valid = t < T;
  const float* src = (threadIdx.x < kTile ? lseRow : dsumRow) + (valid ? t : 0);
  cpAsync4(fring + stage * 2 * kTile + threadIdx.x, src, valid);  // [lse 64][D 64]
}

// Per-warp accumulators and the block-constant A fragments of its 16 keys' K.
struct KeyState {
  float dk[kHs / 8][4], dv[kHs / 8][4];  // keys (g, g+8), dims 8n+2c.., accumulator layout
  u32 ka[kHs / 16][4];                   // K rows of the warp, k = dims 16kd..16kd+15
};

// S^T = K Q^T and dP^T = V dO^T for the warp's 16 keys x queries qh..qh+31 of the tile (qh =
// 0 or 32; n-block n below is queries qh+8n..qh+8n+7), then in place P^T and
// dS^T = P^T (dP^T - D) scale. mask (diagonal or tail tile): P = 0 where key > query or query
// >= T. Unmasked elements need no test: off the diagonal every key precedes every query, and
// off the tail every query is < T. Masked entries are selected to 0, never multiplied, so an
// ex2 overflow there (key > query can have a large score) cannot leak.
template <class H>
__device__ __forceinline__ void scoresTile(float (&st)[kHalf / 8][4], float (&dpt)[kHalf / 8][4],
                                           const KeyState& ks, const uint16_t* vs,
                                           const uint16_t* qs, const uint16_t* gs,
                                           const float* lses, const float* dsums, bool mask, int qh,
                                           int wr, int wk0, int q0, int T, float scale,
                                           float scaleLog2, int lane) {
  const int g = lane / 4, c = lane % 4;
#pragma unroll
  for (int n = 0; n < kHalf / 8; ++n)
#pragma unroll
    for (int i = 0; i < 4; ++i) st[n][i] = dpt[n][i] = 0.f;
  // V's A fragments are reloaded per half (4 ldmatrix): held like K's they cost 16 registers
  // and a spill at the 168 cap.
  u32 va[kHs / 16][4];
#pragma unroll
  for (int kd = 0; kd < kHs / 16; ++kd) loadA(va[kd], vs, wr, 16 * kd, lane);
    // B[d][query] = Q[query][d] (dO likewise): rows by ldmatrix (loadBRows: rows qh+8n.., dims
    // 32half..32half+31, so r[0..1] are k-step kd = 2half, r[2..3] kd = 2half+1).
#pragma unroll
  for (int n = 0; n < kHalf / 8; ++n) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      u32 qb[4], gb[4];
      loadBRows(qb, qs, qh + 8 * n, 32 * half, lane);
      loadBRows(gb, gs, qh + 8 * n, 32 * half, lane);
#pragma unroll
      for (int kk = 0; kk < 2; ++kk) {
        const int kd = 2 * half + kk;
        H::mma(st[n], ks.ka[kd], qb[2 * kk], qb[2 * kk + 1]);
        H::mma(dpt[n], va[kd], gb[2 * kk], gb[2 * kk + 1]);
      }
    }
  }
  // Element i of block n: key wk0 + g + 8(i/2), query q0 + qh + 8n + 2c + i%2 (lse, D indices
  // qh + 8n + 2c + i%2: an 8-byte aligned pair, qh + 8n + 2c being even).
#pragma unroll
  for (int n = 0; n < kHalf / 8; ++n) {
    const float2 lq = *reinterpret_cast<const float2*>(lses + qh + 8 * n + 2 * c);
    const float2 dq = *reinterpret_cast<const float2*>(dsums + qh + 8 * n + 2 * c);
    const float l2[2] = {lq.x * kLog2e, lq.y * kLog2e}, dd[2] = {dq.x, dq.y};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float p = ex2(fmaf(st[n][i], scaleLog2, -l2[i % 2]));
      if (mask) {
        const int k = wk0 + g + 8 * (i / 2), q = q0 + qh + 8 * n + 2 * c + (i % 2);
        if (k > q || q >= T) p = 0.f;
      }
      st[n][i] = p;
      dpt[n][i] = p * (dpt[n][i] - dd[i % 2]) * scale;
    }
  }
}

// dV += P^T dO and dK += dS^T Q: the accumulator blocks 2kq, 2kq+1 of P^T (dS^T) are the A
// fragment of queries qh+16kq..qh+16kq+15; dO's and Q's [query][d] B fragments come transposed
// (loadBTrans at tile row qh + 16kq).
template <class H>
__device__ __forceinline__ void keyGradsTile(KeyState& ks, const float (&st)[kHalf / 8][4],
                                             const float (&dpt)[kHalf / 8][4], const uint16_t* qs,
                                             const uint16_t* gs, int qh, int lane) {
#pragma unroll
  for (int kq = 0; kq < kHalf / 16; ++kq) {
    u32 pa[4], da[4];
    accToA<H>(pa, st[2 * kq], st[2 * kq + 1]);
    accToA<H>(da, dpt[2 * kq], dpt[2 * kq + 1]);
#pragma unroll
    for (int j = 0; j < kHs / 16; ++j) {
      u32 gb[4], qb[4];
      loadBTrans(gb, gs, qh + 16 * kq, 16 * j, lane);
      H::mma(ks.dv[2 * j], pa, gb[0], gb[1]);
      H::mma(ks.dv[2 * j + 1], pa, gb[2], gb[3]);
      loadBTrans(qb, qs, qh + 16 * kq, 16 * j, lane);
      H::mma(ks.dk[2 * j], da, qb[0], qb[1]);
      H::mma(ks.dk[2 * j + 1], da, qb[2], qb[3]);
    }
  }
}

// dQ rows wr..wr+15 of the query tile = dS K over the block's 64 keys, added to dq (fp32 [B, T,
// C] at row0 = dq + (b*T + q0)*C + h*64). A[query][key] = dst[key][query]: transposed ldmatrix,
// matrix i (lanes 8i..8i+7) at keys 16kk + 8*(i/2) + l%8, queries wr + 8*(i%2), gives a[i].
// B[key][d] = K[key][d]: transposed like V in the forward.
template <class H>
__device__ __forceinline__ void queryGradTile(float* row0, const uint16_t* dst, const uint16_t* ks,
                                              int wr, int rowsLeft, int C, int lane) {
  const int g = lane / 4, c = lane % 4;
  float dqa[kHs / 8][4];
#pragma unroll
  for (int n = 0; n < kHs / 8; ++n)
#pragma unroll
    for (int i = 0; i < 4; ++i) dqa[n][i] = 0.f;
#pragma unroll
  for (int kk = 0; kk < kTile / 16; ++kk) {
    u32 sa[4];
    ldmatrixX4Trans(sa,
                    dst + (16 * kk + 8 * (lane / 16) + lane % 8) * kLd + wr + 8 * ((lane / 8) % 2));
#pragma unroll
    for (int j = 0; j < kHs / 16; ++j) {
      u32 kb[4];
      loadBTrans(kb, ks, 16 * kk, 16 * j, lane);
      H::mma(dqa[2 * j], sa, kb[0], kb[1]);
      H::mma(dqa[2 * j + 1], sa, kb[2], kb[3]);
    }
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int t = wr + g + 8 * r;  // query index within the tile
    if (t >= rowsLeft) continue;
    float* row = row0 + static_cast<size_t>(t) * C;
#pragma unroll
    for (int n = 0; n < kHs / 8; ++n)
      atomicAddF32x2(row + 8 * n + 2 * c, dqa[n][2 * r], dqa[n][2 * r + 1]);
  }
}

// *p (an H pair: bf16 or fp16) += (lo, hi), rounded to nearest even.
template <class H>
__device__ __forceinline__ void addPair(uint16_t* p, float lo, float hi) {
  const u32 old = ld32(p);
  st32(p, H::pack(H::lo(old) + lo, H::hi(old) + hi));
}

// Grid (B*NH, numTiles): blockIdx.x fastest, so every head's key tile 0 (the most query tiles)
// is dispatched first. Warp w owns keys k0 + 16w .. k0 + 16w + 15.
template <class H>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    attentionTc3BackwardKernel(uint16_t* dqkv, float* dq, const uint16_t* dout, const uint16_t* qkv,
                               const float* lse, const float* dsum, int T, int C, int NH,
                               float scale, float scaleLog2) {
  extern __shared__ __align__(16) uint16_t tc3BwdSmem[];
  uint16_t* ks = tc3BwdSmem;          // [64][kLd] keys of this block
  uint16_t* vs = ks + kTileElems;     // [64][kLd] values
  uint16_t* dst = vs + kTileElems;    // [64 keys][kLd] dS^T (H)
  uint16_t* ring = dst + kTileElems;  // kStages x {Q, dO} [64][kLd]
  float* fring = reinterpret_cast<float*>(ring + kStages * kStageElems);  // kStages x {lse, D}
  const int bh = blockIdx.x, b = bh / NH, h = bh % NH;
  const int kt = blockIdx.y, numTiles = gridDim.y;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
  const int C3 = 3 * C, k0 = kt * kTile, wr = 16 * warp, wk0 = k0 + wr;
  const uint16_t* base = qkv + static_cast<size_t>(b) * T * C3 + h * kHs;
  const uint16_t* gbase = dout + static_cast<size_t>(b) * T * C + h * kHs;
  const float* lseRow = lse + static_cast<size_t>(bh) * T;
  const float* dsumRow = dsum + static_cast<size_t>(bh) * T;
  loadTileAsync<kTile, kThreads>(ks, base + C, C3, k0, T);
  loadTileAsync<kTile, kThreads>(vs, base + 2 * C, C3, k0, T);
  issueQueryTile(ring, fring, 0, base, gbase, lseRow, dsumRow, kt, T, C);
  cpAsyncCommit();  // group 0: K, V and query tile kt

  KeyState ksr;
#pragma unroll
  for (int n = 0; n < kHs / 8; ++n)
#pragma unroll
    for (int i = 0; i < 4; ++i) ksr.dk[n][i] = ksr.dv[n][i] = 0.f;
  for (int qt = kt; qt < numTiles; ++qt) {
    const int it = qt - kt, stage = it % kStages, q0 = qt * kTile;
    // Ring hazard: this load writes stage (it+1)%2, last read at iteration it-1, all of whose
    // reads of the ring precede its barrier (B), which this thread (so every warp) has passed.
    if (qt + 1 < numTiles)
      issueQueryTile(ring, fring, (it + 1) % kStages, base, gbase, lseRow, dsumRow, qt + 1, T, C);
    cpAsyncCommit();  // possibly empty: "all but the newest group" is always tile qt
    cpAsyncWait<1>();
    __syncthreads();  // (A) tile qt visible; every warp's dQ of tile qt-1 (reads dst) done
    if (it == 0) {    // K, V landed with group 0, visible after (A)
#pragma unroll
      for (int kd = 0; kd < kHs / 16; ++kd) loadA(ksr.ka[kd], ks, wr, 16 * kd, lane);
    }
    const uint16_t* qs = ring + stage * kStageElems;
    const uint16_t* gs = qs + kTileElems;
    const float* lses = fring + stage * 2 * kTile;
    const bool mask = qt == kt || q0 + kTile > T;
    // The halves touch disjoint dS^T columns and only read the ring, so no barrier between.
#pragma unroll 1
    for (int qh = 0; qh < kTile; qh += kHalf) {
      float st[kHalf / 8][4], dpt[kHalf / 8][4];
      scoresTile<H>(st, dpt, ksr, vs, qs, gs, lses, lses + kTile, mask, qh, wr, wk0, q0, T, scale,
                    scaleLog2, lane);
      // dS^T (H, as the tensor cores will read it) to shared memory: dst[key][query], columns
      // qh + 8n + 2c.. (element pairs 2r, 2r+1 of block n: key g + 8r, adjacent queries).
#pragma unroll
      for (int n = 0; n < kHalf / 8; ++n)
#pragma unroll
        for (int r = 0; r < 2; ++r)
          st32(dst + (wr + g + 8 * r) * kLd + qh + 8 * n + 2 * c,
               H::pack(dpt[n][2 * r], dpt[n][2 * r + 1]));
      keyGradsTile<H>(ksr, st, dpt, qs, gs, qh, lane);
    }
    __syncthreads();  // (B) all of dS^T written
    queryGradTile<H>(dq + (static_cast<size_t>(b) * T + q0) * C + h * kHs, dst, ks, wr, T - q0, C,
                     lane);
  }
  // This block is the only writer of its keys' dK, dV columns: plain read-add-write.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int t = wk0 + g + 8 * r;
    if (t >= T) continue;
    uint16_t* row = dqkv + (static_cast<size_t>(b) * T + t) * C3 + h * kHs;
#pragma unroll
    for (int n = 0; n < kHs / 8; ++n) {
      const int d = 8 * n + 2 * c;
      addPair<H>(row + C + d, ksr.dk[n][2 * r], ksr.dk[n][2 * r + 1]);
      addPair<H>(row + 2 * C + d, ksr.dv[n][2 * r], ksr.dv[n][2 * r + 1]);
    }
  }
}

}  // namespace

void attentionTc3Backward(uint16_t* dqkv, float* dq, const uint16_t* dout, const uint16_t* qkv,
                          const float* lse, const float* dsum, int B, int T, int C, int NH,
                          cudaStream_t stream, bool fp16) {
  auto kernel = fp16 ? attentionTc3BackwardKernel<Fp16> : attentionTc3BackwardKernel<Bf16>;
  DS_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(kSmemBytes)));
  // 3 blocks x 64 KiB need the largest shared carveout; ask rather than rely on the driver.
  DS_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                     cudaSharedmemCarveoutMaxShared));
  const float scale = 1.0f / std::sqrt(static_cast<float>(kHs));
  dim3 grid(B * NH, (T + kTile - 1) / kTile);
  kernel<<<grid, kThreads, kSmemBytes, stream>>>(dqkv, dq, dout, qkv, lse, dsum, T, C, NH, scale,
                                                 scale * kLog2e);
  DS_CUDA_LAUNCHED("attentionTc3BackwardKernel");
}

}  // namespace ds::runtime::cuda
