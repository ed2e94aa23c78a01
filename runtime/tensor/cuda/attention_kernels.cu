// CudaOps causal self-attention, flash style (FlashAttention-2's schedule on SIMT fp32 cores):
// forward keeps a 64-query tile per block and streams 64-key K/V tiles through shared memory
// with an online softmax; backward recomputes the probabilities from the saved log-sum-exp.
// Not a T x T algorithm: aux is only the fp32 lse [B, NH, T]; no buffer grows with T^2.
// Invariant: every product and accumulator is fp32; bf16 and fp16 are storage formats only. The
// dispatch below sends bf16 (and fp16, on tc3 only) with head size 64 to the tensor-core kernels
// (by default tc3: attention_tc2.h's forward, attention_tc3.h's backward; tc2 or tc1 by
// DS_CUDA_ATTENTION) unless DS_CUDA_ATTENTION=simt; these SIMT kernels stay the reference and
// every other case (fp32, other head sizes, fp16 unless on tc3).
#include "core/knobs.h"
#include "runtime/tensor/cuda/attention_tc.h"
#include "runtime/tensor/cuda/attention_tc2.h"
#include "runtime/tensor/cuda/attention_tc3.h"
#include "runtime/tensor/cuda/cuda_check.h"
#include "runtime/tensor/cuda/cuda_ops.h"
#include "runtime/tensor/cuda/element_io.cuh"
#include "runtime/tensor/tensor_knobs.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

namespace ds::runtime::cuda {
namespace {

constexpr int kTile = 64;       // queries per block and keys per K/V tile
constexpr int kThreads = 256;   // 16 x 16; thread (ty, tx) owns rows ty+16i and columns tx+16j
constexpr int kPd = kTile + 1;  // padded row stride of the 64 x 64 probability tiles
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// Row stride of a 64 x HS operand tile in shared memory: +1 so that 16 threads reading one column
// of 16 different rows hit 16 different banks.
template <int HS>
constexpr int rowStride() {
  return HS + 1;
}

// dst[r][col] = src[(row0 + r) * ld + col] for r < 64, col < HS; rows at or past T are zeros.
template <int HS, class E>
__device__ __forceinline__ void loadTile(float* dst, const E* src, int ld, int row0, int T) {
  for (int e = threadIdx.x; e < kTile * HS; e += kThreads) {
    const int r = e / HS, col = e % HS, t = row0 + r;
    dst[r * rowStride<HS>() + col] = t < T ? loadF(src + static_cast<size_t>(t) * ld + col) : 0.f;
  }
}

// Max / sum over the 16 lanes of a half warp (the 16 tx of one ty).
__device__ __forceinline__ float halfWarpMax(float v) {
#pragma unroll
  for (int off = 8; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}
__device__ __forceinline__ float halfWarpSum(float v) {
#pragma unroll
  for (int off = 8; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// Grid (numTiles, B*NH). out[b, t, h*HS + d]; lse[bh, t] = ln(sum_j exp(score_tj)).
template <int HS, class E>
__global__ void __launch_bounds__(kThreads)
    attentionForwardKernel(E* out, float* lse, const E* qkv, int T, int C, int NH,
                           float scaleLog2) {
  constexpr int kLd = rowStride<HS>(), kCols = HS / 16;
  extern __shared__ float smem[];
  float* qs = smem;                           // [64][kLd] queries
  float* ks = qs + kTile * kLd;               // [64][kLd] keys
  float* vs = ks + kTile * kLd;               // [64][kLd] values
  float* ps = vs + kTile * kLd;               // [64][kPd] probabilities of this key tile
  const int qt = gridDim.x - 1 - blockIdx.x;  // the long (late) query tiles start first
  const int bh = blockIdx.y, b = bh / NH, h = bh % NH;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int C3 = 3 * C, q0 = qt * kTile;
  const E* base = qkv + static_cast<size_t>(b) * T * C3 + h * HS;
  loadTile<HS>(qs, base, C3, q0, T);

  float m[4], l[4], o[4][kCols];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    m[i] = -INFINITY;
    l[i] = 0.f;
#pragma unroll
    for (int jd = 0; jd < kCols; ++jd) o[i][jd] = 0.f;
  }
  for (int kt = 0; kt <= qt; ++kt) {
    const int k0 = kt * kTile;
    __syncthreads();  // the previous tile's readers of ks, vs, ps are done
    loadTile<HS>(ks, base + C, C3, k0, T);
    loadTile<HS>(vs, base + 2 * C, C3, k0, T);
    __syncthreads();
    float s[4][4] = {};
#pragma unroll 8
    for (int d = 0; d < HS; ++d) {
      float a[4], kk[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = qs[(ty + 16 * i) * kLd + d];
#pragma unroll
      for (int j = 0; j < 4; ++j) kk[j] = ks[(tx + 16 * j) * kLd + d];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) s[i][j] = fmaf(a[i], kk[j], s[i][j]);
    }
    // Online softmax in base 2. On the diagonal tile (k0 == q0) keys past the query are masked;
    // column 0 of the tile never is, so every row max is finite.
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int r = ty + 16 * i;
      float rowMax = -INFINITY;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        s[i][j] = (kt == qt && tx + 16 * j > r) ? -INFINITY : s[i][j] * scaleLog2;
        rowMax = fmaxf(rowMax, s[i][j]);
      }
      const float mNew = fmaxf(m[i], halfWarpMax(rowMax));
      const float corr = exp2f(m[i] - mNew);  // 0 on the first tile (m = -inf)
      float rowSum = 0.f;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float p = exp2f(s[i][j] - mNew);
        ps[r * kPd + tx + 16 * j] = p;
        rowSum += p;
      }
      l[i] = l[i] * corr + halfWarpSum(rowSum);
      m[i] = mNew;
#pragma unroll
      for (int jd = 0; jd < kCols; ++jd) o[i][jd] *= corr;
    }
    __syncthreads();
#pragma unroll 4
    for (int c = 0; c < kTile; ++c) {
      float p[4], v[kCols];
#pragma unroll
      for (int i = 0; i < 4; ++i) p[i] = ps[(ty + 16 * i) * kPd + c];
#pragma unroll
      for (int jd = 0; jd < kCols; ++jd) v[jd] = vs[c * kLd + tx + 16 * jd];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int jd = 0; jd < kCols; ++jd) o[i][jd] = fmaf(p[i], v[jd], o[i][jd]);
    }
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int t = q0 + ty + 16 * i;
    if (t >= T) continue;
    const float inv = 1.f / l[i];
    E* row = out + (static_cast<size_t>(b) * T + t) * C + h * HS;
#pragma unroll
    for (int jd = 0; jd < kCols; ++jd) storeF(row + tx + 16 * jd, o[i][jd] * inv);
    if (tx == 0) lse[static_cast<size_t>(bh) * T + t] = (m[i] + log2f(l[i])) * kLn2;
  }
}

// dsum[bh, t] = sum_d dout[b, t, h*HS + d] * out[b, t, h*HS + d]; one warp per (b, t, h).
template <int HS, class E>
__global__ void attentionRowDotKernel(float* dsum, const E* dout, const E* out, int B, int T, int C,
                                      int NH) {
  const size_t warp = (static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= static_cast<size_t>(B) * T * NH) return;
  const int h = static_cast<int>(warp % NH);
  const size_t bt = warp / NH;  // b * T + t
  const size_t at = bt * C + static_cast<size_t>(h) * HS;
  float acc = 0.f;
  for (int d = lane; d < HS; d += 32) acc = fmaf(loadF(dout + at + d), loadF(out + at + d), acc);
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
  const size_t b = bt / T, t = bt % T;
  if (lane == 0) dsum[(b * NH + h) * T + t] = acc;
}

// Grid (numTiles, B*NH): one 64-key tile per block, looping over the query tiles at or after it.
// dK, dV accumulate in registers and are added to dqkv once; dQ goes by fp32 atomics to dq
// (row stride dqLd: dqkv itself for fp32, an fp32 scratch for bf16).
template <int HS, class E>
__global__ void __launch_bounds__(kThreads)
    attentionBackwardKernel(E* dqkv, float* dq, int dqLd, const E* dout, const E* qkv,
                            const float* lse, const float* dsum, int T, int C, int NH, float scale,
                            float scaleLog2) {
  constexpr int kLd = rowStride<HS>(), kCols = HS / 16;
  extern __shared__ float smem[];
  float* ks = smem;                                 // [64][kLd] keys of this block
  float* vs = ks + kTile * kLd;                     // [64][kLd] values of this block
  float* qs = vs + kTile * kLd;                     // [64][kLd] queries of the current query tile
  float* gs = qs + kTile * kLd;                     // [64][kLd] dout of the current query tile
  float* ps = gs + kTile * kLd;                     // [64][kPd] P
  float* dss = ps + kTile * kPd;                    // [64][kPd] dS = P * (dP - D) * scale
  float* lses = dss + kTile * kPd;                  // [64] lse * log2(e)
  float* dsums = lses + kTile;                      // [64] D
  const int kt = blockIdx.x, numTiles = gridDim.x;  // key tile 0 has the most work: first
  const int bh = blockIdx.y, b = bh / NH, h = bh % NH;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int C3 = 3 * C, k0 = kt * kTile;
  const E* base = qkv + static_cast<size_t>(b) * T * C3 + h * HS;
  const E* gbase = dout + static_cast<size_t>(b) * T * C + h * HS;
  loadTile<HS>(ks, base + C, C3, k0, T);
  loadTile<HS>(vs, base + 2 * C, C3, k0, T);

  float dk[4][kCols], dv[4][kCols];  // key rows ty+16i, columns tx+16jd
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int jd = 0; jd < kCols; ++jd) dk[i][jd] = dv[i][jd] = 0.f;

  for (int qt = kt; qt < numTiles; ++qt) {
    const int q0 = qt * kTile;
    __syncthreads();  // the previous query tile's readers are done
    loadTile<HS>(qs, base, C3, q0, T);
    loadTile<HS>(gs, gbase, C, q0, T);
    if (threadIdx.x < kTile) {
      const int t = q0 + threadIdx.x;
      const size_t at = static_cast<size_t>(bh) * T + t;
      lses[threadIdx.x] = t < T ? lse[at] * kLog2e : 0.f;
      dsums[threadIdx.x] = t < T ? dsum[at] : 0.f;
    }
    __syncthreads();
    // S = Q K^T and dP = dO V^T on query rows ty+16i, key columns tx+16j.
    float s[4][4] = {}, dp[4][4] = {};
#pragma unroll 4
    for (int d = 0; d < HS; ++d) {
      float a[4], g[4], kk[4], vv[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        a[i] = qs[(ty + 16 * i) * kLd + d];
        g[i] = gs[(ty + 16 * i) * kLd + d];
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        kk[j] = ks[(tx + 16 * j) * kLd + d];
        vv[j] = vs[(tx + 16 * j) * kLd + d];
      }
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          s[i][j] = fmaf(a[i], kk[j], s[i][j]);
          dp[i][j] = fmaf(g[i], vv[j], dp[i][j]);
        }
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int r = ty + 16 * i, tq = q0 + r;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int c = tx + 16 * j, tk = k0 + c;
        const float p = (tq < T && tk <= tq) ? exp2f(s[i][j] * scaleLog2 - lses[r]) : 0.f;
        ps[r * kPd + c] = p;
        dss[r * kPd + c] = p * (dp[i][j] - dsums[r]) * scale;
      }
    }
    __syncthreads();
    // dV += P^T dO and dK += dS^T Q on key rows ty+16i, columns tx+16jd.
#pragma unroll 2
    for (int r = 0; r < kTile; ++r) {
      float p[4], dsv[4], g[kCols], a[kCols];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        p[i] = ps[r * kPd + ty + 16 * i];
        dsv[i] = dss[r * kPd + ty + 16 * i];
      }
#pragma unroll
      for (int jd = 0; jd < kCols; ++jd) {
        g[jd] = gs[r * kLd + tx + 16 * jd];
        a[jd] = qs[r * kLd + tx + 16 * jd];
      }
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int jd = 0; jd < kCols; ++jd) {
          dv[i][jd] = fmaf(p[i], g[jd], dv[i][jd]);
          dk[i][jd] = fmaf(dsv[i], a[jd], dk[i][jd]);
        }
    }
    // dQ += dS K on query rows ty+16i, columns tx+16jd.
    float dqp[4][kCols] = {};
#pragma unroll 4
    for (int c = 0; c < kTile; ++c) {
      float dsv[4], kk[kCols];
#pragma unroll
      for (int i = 0; i < 4; ++i) dsv[i] = dss[(ty + 16 * i) * kPd + c];
#pragma unroll
      for (int jd = 0; jd < kCols; ++jd) kk[jd] = ks[c * kLd + tx + 16 * jd];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int jd = 0; jd < kCols; ++jd) dqp[i][jd] = fmaf(dsv[i], kk[jd], dqp[i][jd]);
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int t = q0 + ty + 16 * i;
      if (t >= T) continue;
      float* row = dq + (static_cast<size_t>(b) * T + t) * dqLd + h * HS;
#pragma unroll
      for (int jd = 0; jd < kCols; ++jd) atomicAdd(row + tx + 16 * jd, dqp[i][jd]);
    }
  }
  // This block is the only writer of its keys' dK, dV columns: plain read-add-write.
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int t = k0 + ty + 16 * i;
    if (t >= T) continue;
    E* row = dqkv + (static_cast<size_t>(b) * T + t) * C3 + h * HS;
#pragma unroll
    for (int jd = 0; jd < kCols; ++jd) {
      const int d = tx + 16 * jd;
      storeF(row + C + d, loadF(row + C + d) + dk[i][jd]);
      storeF(row + 2 * C + d, loadF(row + 2 * C + d) + dv[i][jd]);
    }
  }
}

// dqkv[b, t, c] += dq[b, t, c] for the query columns c < C (the 16-bit paths' fp32 dQ).
template <class E>
__global__ void addQueryGradKernel(E* dqkv, const float* dq, size_t rows, int C) {
  const size_t n = rows * C;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    E* at = dqkv + (i / C) * 3 * C + i % C;
    storeF(at, loadF(at) + dq[i]);
  }
}

template <int HS>
constexpr size_t forwardSmemBytes() {
  return sizeof(float) * (3 * kTile * rowStride<HS>() + kTile * kPd);
}
template <int HS>
constexpr size_t backwardSmemBytes() {
  return sizeof(float) * (4 * kTile * rowStride<HS>() + 2 * kTile * kPd + 2 * kTile);
}

struct Shape {
  int B, T, C, NH, hs;
};

Shape checkShape(int B, int T, int C, int NH, DType dt, const char* what) {
  if (B < 0 || T < 0 || C <= 0 || NH <= 0 || C % NH != 0)
    throw NotSupported(std::string(what) + ": bad shape B=" + std::to_string(B) + " T=" +
                       std::to_string(T) + " C=" + std::to_string(C) + " NH=" + std::to_string(NH));
  const int hs = C / NH;
  if (hs % 16 != 0 || hs < 16 || hs > 128)
    throw NotSupported(std::string(what) + ": head size " + std::to_string(hs) +
                       " (C=" + std::to_string(C) + ", NH=" + std::to_string(NH) +
                       "); the CUDA kernel supports multiples of 16 up to 128");
  if (dt != DType::kF32 && dt != DType::kBF16 && dt != DType::kF16)
    throw NotSupported(std::string(what) + ": dtype " + std::string(dtypeName(dt)) +
                       " (fp32, bf16 or fp16 only)");
  if (static_cast<long>(B) * NH > 65535)
    throw NotSupported(std::string(what) + ": B*NH=" + std::to_string(long(B) * NH) +
                       " exceeds the grid's 65535");
  return {B, T, C, NH, hs};
}

template <int HS, class E>
void launchForward(E* out, float* lse, const E* qkv, const Shape& s, cudaStream_t stream) {
  constexpr size_t smem = forwardSmemBytes<HS>();
  auto kernel = attentionForwardKernel<HS, E>;
  DS_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(smem)));
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
  dim3 grid((s.T + kTile - 1) / kTile, s.B * s.NH);
  kernel<<<grid, kThreads, smem, stream>>>(out, lse, qkv, s.T, s.C, s.NH, scale * kLog2e);
  DS_CUDA_LAUNCHED("attentionForwardKernel");
}

template <int HS, class E>
void launchRowDot(float* dsum, const E* dout, const E* out, const Shape& s, cudaStream_t stream) {
  const size_t warps = static_cast<size_t>(s.B) * s.T * s.NH;
  attentionRowDotKernel<HS, E><<<static_cast<unsigned>((warps * 32 + 255) / 256), 256, 0, stream>>>(
      dsum, dout, out, s.B, s.T, s.C, s.NH);
  DS_CUDA_LAUNCHED("attentionRowDotKernel");
}

template <int HS, class E>
void launchBackward(E* dqkv, float* dq, int dqLd, float* dsum, const E* dout, const E* qkv,
                    const E* out, const float* lse, const Shape& s, cudaStream_t stream) {
  launchRowDot<HS>(dsum, dout, out, s, stream);
  constexpr size_t smem = backwardSmemBytes<HS>();
  auto kernel = attentionBackwardKernel<HS, E>;
  DS_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(smem)));
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
  dim3 grid((s.T + kTile - 1) / kTile, s.B * s.NH);
  kernel<<<grid, kThreads, smem, stream>>>(dqkv, dq, dqLd, dout, qkv, lse, dsum, s.T, s.C, s.NH,
                                           scale, scale * kLog2e);
  DS_CUDA_LAUNCHED("attentionBackwardKernel");
}

// Calls fn.template operator()<HS>() for the shape's head size (checkShape admitted it).
template <class Fn>
void withHeadSize(int hs, Fn&& fn) {
  switch (hs) {
    case 16: fn.template operator()<16>(); break;
    case 32: fn.template operator()<32>(); break;
    case 48: fn.template operator()<48>(); break;
    case 64: fn.template operator()<64>(); break;
    case 80: fn.template operator()<80>(); break;
    case 96: fn.template operator()<96>(); break;
    case 112: fn.template operator()<112>(); break;
    default: fn.template operator()<128>(); break;
  }
}

// Which kernels DS_CUDA_ATTENTION asks for (read per call, so that a fallback takes effect
// without a rebuild or restart). The tensor-core ones still need bf16, hs 64 and alignment.
// tc3 differs from tc2 only in the backward.
enum class AttentionPath { kTc3, kTc2, kTc1, kSimt };

AttentionPath attentionPath() {
  const auto v = knobChoice(knobs::kCudaAttention);
  if (!v || *v == "auto" || *v == "tc3") return AttentionPath::kTc3;
  if (*v == "tc2") return AttentionPath::kTc2;
  return *v == "tc1" ? AttentionPath::kTc1 : AttentionPath::kSimt;
}

// Whether dt takes the tensor-core kernels on this path (alignment and head size still decide):
// bf16 on every tensor-core path; fp16 only on tc3 (auto): tc2's forward and tc3's backward are
// the only kernels with an fp16 mma (tc1 and tc2's backward are bf16 only).
bool useTensorCores(DType dt, AttentionPath path) {
  if (dt == DType::kBF16) return path != AttentionPath::kSimt;
  return dt == DType::kF16 && path == AttentionPath::kTc3;
}

}  // namespace

size_t CudaOps::attentionAuxBytes(int B, int T, int NH) const {
  return sizeof(float) * static_cast<size_t>(B) * T * NH;
}

void CudaOps::attentionForward(void* out, void* aux, const void* qkv, int B, int T, int C, int NH,
                               DType dt) {
  const Shape s = checkShape(B, T, C, NH, dt, "attentionForward");
  if (B == 0 || T == 0) return;
  auto* lse = static_cast<float*>(aux);
  const AttentionPath path = attentionPath();
  if (useTensorCores(dt, path) && attentionTcSupported(s.hs, qkv, out, qkv, out)) {
    auto* o = static_cast<uint16_t*>(out);
    const auto* x = static_cast<const uint16_t*>(qkv);
    if (dt == DType::kF16) attentionTc2Forward(o, lse, x, B, T, C, NH, stream_, true);
    else if (path != AttentionPath::kTc1) attentionTc2Forward(o, lse, x, B, T, C, NH, stream_);
    else attentionTcForward(o, lse, x, B, T, C, NH, stream_);
    return;
  }
  withHeadSize(s.hs, [&]<int HS>() {
    if (dt == DType::kF32)
      launchForward<HS>(static_cast<float*>(out), lse, static_cast<const float*>(qkv), s, stream_);
    else if (dt == DType::kF16)
      launchForward<HS>(static_cast<fp16*>(out), lse, static_cast<const fp16*>(qkv), s, stream_);
    else launchForward<HS>(static_cast<bf16*>(out), lse, static_cast<const bf16*>(qkv), s, stream_);
  });
}

void CudaOps::attentionBackward(void* dqkv, const void* dout, const void* qkv, const void* out,
                                const void* aux, int B, int T, int C, int NH, DType dt) {
  const Shape s = checkShape(B, T, C, NH, dt, "attentionBackward");
  if (B == 0 || T == 0) return;
  const auto* lse = static_cast<const float*>(aux);
  const size_t rows = static_cast<size_t>(B) * T;
  // Scratch: D [B, NH, T] fp32, then (16-bit types only) the fp32 dQ accumulator [B, T, C],
  // starting 256-byte aligned (tc2's vector atomics need 8 bytes; rows * NH may be odd).
  const size_t dsumBytes = (sizeof(float) * rows * NH + 255) / 256 * 256;
  const size_t dqBytes = dt != DType::kF32 ? sizeof(float) * rows * C : 0;
  auto* dsum = static_cast<float*>(scratch(dsumBytes + dqBytes));
  float* dq = dsum + dsumBytes / sizeof(float);
  // The SIMT kernels on 16-bit storage E: dQ accumulates in fp32, then lands in dqkv.
  auto simt16 = [&]<int HS, class E>() {
    auto* g = static_cast<E*>(dqkv);
    launchBackward<HS>(g, dq, C, dsum, static_cast<const E*>(dout), static_cast<const E*>(qkv),
                       static_cast<const E*>(out), lse, s, stream_);
  };
  withHeadSize(s.hs, [&]<int HS>() {
    if (dt == DType::kF32) {
      auto* g = static_cast<float*>(dqkv);
      launchBackward<HS>(g, g, 3 * C, dsum, static_cast<const float*>(dout),
                         static_cast<const float*>(qkv), static_cast<const float*>(out), lse, s,
                         stream_);
      return;
    }
    DS_CUDA_CHECK(cudaMemsetAsync(dq, 0, dqBytes, stream_));
    const AttentionPath path = attentionPath();
    const bool tensorCores =
        useTensorCores(dt, path) && attentionTcSupported(HS, qkv, out, dout, dqkv);
    if (dt == DType::kF16 && !tensorCores) {
      simt16.template operator()<HS, fp16>();
    } else if (dt == DType::kF16) {
      launchRowDot<HS>(dsum, static_cast<const fp16*>(dout), static_cast<const fp16*>(out), s,
                       stream_);
      attentionTc3Backward(static_cast<uint16_t*>(dqkv), dq, static_cast<const uint16_t*>(dout),
                           static_cast<const uint16_t*>(qkv), lse, dsum, B, T, C, NH, stream_,
                           true);
    } else if (tensorCores) {
      launchRowDot<HS>(dsum, static_cast<const bf16*>(dout), static_cast<const bf16*>(out), s,
                       stream_);
      auto* g16 = static_cast<uint16_t*>(dqkv);
      const auto* gOut16 = static_cast<const uint16_t*>(dout);
      const auto* x16 = static_cast<const uint16_t*>(qkv);
      if (path == AttentionPath::kTc3)
        attentionTc3Backward(g16, dq, gOut16, x16, lse, dsum, B, T, C, NH, stream_);
      else if (path == AttentionPath::kTc2)
        attentionTc2Backward(g16, dq, gOut16, x16, lse, dsum, B, T, C, NH, stream_);
      else attentionTcBackward(g16, dq, gOut16, x16, lse, dsum, B, T, C, NH, stream_);
    } else {
      simt16.template operator()<HS, bf16>();
    }
    const size_t n = rows * C;
    const unsigned blocks = static_cast<unsigned>(std::min<size_t>((n + 255) / 256, 65535));
    if (dt == DType::kF16)
      addQueryGradKernel<<<blocks, 256, 0, stream_>>>(static_cast<fp16*>(dqkv), dq, rows, C);
    else addQueryGradKernel<<<blocks, 256, 0, stream_>>>(static_cast<bf16*>(dqkv), dq, rows, C);
    DS_CUDA_LAUNCHED("addQueryGradKernel");
  });
}

}  // namespace ds::runtime::cuda
