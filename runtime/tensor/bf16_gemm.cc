// bf16 gemm driver (see bf16_gemm.h): pack A and B into kMR/kNR panels of bf16 pairs, then run
// the micro-kernel over (MC x NC) tiles of C in parallel, K in blocks of kKC pairs so a B
// micro-panel stays in L1 and the tile's A panels in L2. The widen path rounds to bf16 and runs
// sgemm on fp32 copies.
#include "runtime/tensor/bf16_gemm.h"
#include "runtime/tensor/sgemm.h"

#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/knobs.h"
#include "runtime/tensor/bf16_gemm_amx.h"
#include "runtime/tensor/bf16_gemm_kernel.h"
#include "runtime/tensor/kept_scratch.h"
#include "runtime/tensor/tensor_knobs.h"
#include "runtime/tensor/threads.h"

namespace ds::runtime {
namespace {

using detail::kMR;
using detail::kNR;

constexpr int kKC = 128;       // k pairs per block: a B micro-panel is kKC * kNR * 4 = 24 KiB
constexpr int kMCPanels = 12;  // A panels per tile: 96 rows, 48 KiB of A per k block
constexpr int kNCPanels = 4;   // B panels per tile: 192 columns

inline uint32_t bitsOf(const float* p, long i) { return floatToBf16(p[i]).bits; }

// Sizes dst for the rows x K view x packed as row-major words (returns the row stride in words;
// used when rows are contiguous in k) or as kR-row interleaved panels (returns 0). Rows are
// padded with zeros to a multiple of R (the row layout's padding is written here).
long packLayout(KeptScratch<uint32_t>& scratch, const GemmOperand& x, int rows, int K, int R,
                bool allowRows) {
  const int kp = (K + 1) / 2, panels = (rows + R - 1) / R;
  std::vector<uint32_t>& dst = scratch.resized(static_cast<size_t>(panels) * kp * R);
  if (!(allowRows && x.cs == 1)) return 0;
  std::fill(dst.begin() + static_cast<long>(rows) * kp, dst.end(), 0u);
  return kp;
}

// Packs x into d in the layout packLayout chose. Work-shared (orphaned omp for, nowait) when
// called inside a parallel region; serial otherwise.
void packWork(uint32_t* d, long lda, const GemmOperand& x, int rows, int K, int R) {
  const int kp = (K + 1) / 2;
  if (lda > 0) {
    const int chunks = (rows + 15) / 16;
#pragma omp for schedule(static) nowait
    for (int i = 0; i < chunks; ++i) {
      const int r0 = i * 16, n = std::min(16, rows - r0);
      if (x.isBf16) {
        detail::packRowsBf16(d + r0 * lda, lda, static_cast<const uint16_t*>(x.data) + r0 * x.rs,
                             x.rs, n, K);
      } else {
        detail::packRowsF32(d + r0 * lda, lda, static_cast<const float*>(x.data) + r0 * x.rs, x.rs,
                            n, K);
      }
    }
    return;
  }
  const int panels = (rows + R - 1) / R;
#pragma omp for schedule(static) nowait
  for (int i = 0; i < panels; ++i) {
    uint32_t* out = d + static_cast<size_t>(i) * kp * R;
    if (x.isBf16) {
      detail::packPanelBf16(out, R, static_cast<const uint16_t*>(x.data), x.rs, x.cs, i * R, rows,
                            K);
    } else {
      detail::packPanelF32(out, R, static_cast<const float*>(x.data), x.rs, x.cs, i * R, rows, K);
    }
  }
}

// Row-major fp32 copy (rows x K) of bf16(view).
void widenAll(KeptScratch<float>& scratch, const GemmOperand& x, int rows, int K) {
  std::vector<float>& dst = scratch.resized(static_cast<size_t>(rows) * K);
  const long work = static_cast<long>(rows) * K;
#pragma omp parallel for schedule(static) if (work >= kMinParallelWork)
  for (int r = 0; r < rows; ++r) {
    float* out = dst.data() + static_cast<size_t>(r) * K;
    for (int k = 0; k < K; ++k) {
      const long i = r * x.rs + k * x.cs;
      const uint32_t bits = x.isBf16 ? static_cast<const uint16_t*>(x.data)[i]
                                     : bitsOf(static_cast<const float*>(x.data), i);
      const uint32_t u = bits << 16;
      std::memcpy(out + k, &u, 4);
    }
  }
}

void gemmWiden(int M, int N, int K, const GemmOperand& A, const GemmOperand& B, float* C, long ldc,
               float beta) {
  thread_local KeptScratch<float> a, b;
  widenAll(a, A, M, K);
  widenAll(b, B, N, K);
  sgemm(false, true, M, N, K, 1.0f, a.data(), K, b.data(), K, beta, C, static_cast<int>(ldc));
}

void gemmNative(int M, int N, int K, const GemmOperand& A, const GemmOperand& B, float* C, long ldc,
                float beta) {
  thread_local KeptScratch<uint32_t> ap, bp;
  const long lda = packLayout(ap, A, M, K, kMR, true);
  packLayout(bp, B, N, K, kNR, false);
  uint32_t* apd = ap.data();  // thread_local: OpenMP workers must use these pointers
  uint32_t* bpd = bp.data();
  const int kp = (K + 1) / 2;
  const int mPanels = (M + kMR - 1) / kMR, nPanels = (N + kNR - 1) / kNR;
  const int mTiles = (mPanels + kMCPanels - 1) / kMCPanels;
  const int nTiles = (nPanels + kNCPanels - 1) / kNCPanels;
  const int tiles = mTiles * nTiles;
  const long work = static_cast<long>(M) * N * K / 64;
  // One parallel region (packing, one barrier, tiles): on a shared, oversubscribed box every
  // fork/join can wait a scheduler slice for a descheduled thread.
#pragma omp parallel if (work >= kMinParallelWork && tiles > 1)
  {
    packWork(apd, lda, A, M, K, kMR);
    packWork(bpd, 0, B, N, K, kNR);
#pragma omp barrier
#pragma omp for schedule(dynamic, 1)
    for (int t = 0; t < tiles; ++t) {
      const int tm = t % mTiles, tn = t / mTiles;
      const int i0 = tm * kMCPanels, i1 = std::min(mPanels, i0 + kMCPanels);
      const int j0 = tn * kNCPanels, j1 = std::min(nPanels, j0 + kNCPanels);
      for (int k0 = 0; k0 < kp; k0 += kKC) {
        const int kc = std::min(kKC, kp - k0);
        const bool acc = k0 > 0 || beta != 0.0f;
        for (int j = j0; j < j1; ++j) {
          const uint32_t* b = bpd + (static_cast<size_t>(j) * kp + k0) * kNR;
          const int nr = std::min(kNR, N - j * kNR);
          for (int i = i0; i < i1; ++i) {
            const int mr = std::min(kMR, M - i * kMR);
            float* c = C + static_cast<long>(i) * kMR * ldc + j * kNR;
            if (lda > 0) {  // row-major words
              detail::bf16MicroTile(kc, apd + i * kMR * lda + k0, lda, 1, b, c, ldc, mr, nr, acc);
            } else {
              detail::bf16MicroTile(kc, apd + (static_cast<size_t>(i) * kp + k0) * kMR, 1, kMR, b,
                                    c, ldc, mr, nr, acc);
            }
          }
        }
      }
    }
  }  // omp parallel
}

}  // namespace

bool bf16GemmNativeAvailable() {
  static const bool has = detail::bf16GemmCpuHasAvx512Bf16();
  return has;
}

bool bf16GemmAmxAvailable() { return detail::bf16GemmAmxAvailable(); }

const char* bf16GemmPathName(Bf16GemmPath path) {
  switch (path) {
    case Bf16GemmPath::kAuto: return "auto";
    case Bf16GemmPath::kNative: return "avx512";
    case Bf16GemmPath::kWiden: return "widen";
    case Bf16GemmPath::kAmx: return "amx";
  }
  return "?";
}

Bf16GemmPath bf16GemmAutoPath() {
  static const Bf16GemmPath path = [] {
    const auto forced = knobChoice(knobs::kBf16Gemm);  // DS_BF16_GEMM
    if (forced && *forced == "amx") return Bf16GemmPath::kAmx;
    if (forced && *forced == "avx512") return Bf16GemmPath::kNative;
    if (bf16GemmAmxAvailable()) return Bf16GemmPath::kAmx;
    return bf16GemmNativeAvailable() ? Bf16GemmPath::kNative : Bf16GemmPath::kWiden;
  }();
  return path;
}

void gemmBf16(int M, int N, int K, GemmOperand A, GemmOperand B, float* C, long ldc, float beta,
              Bf16GemmPath path) {
  DS_CHECK(M >= 0 && N >= 0 && K >= 0, "gemmBf16: negative size M={} N={} K={}", M, N, K);
  DS_CHECK(beta == 0.0f || beta == 1.0f, "gemmBf16: beta {} is neither 0 nor 1", beta);
  DS_CHECK(ldc >= N, "gemmBf16: ldc {} < N {}", ldc, N);
  if (M == 0 || N == 0) return;
  if (K == 0) {
    if (beta == 0.0f) {
      for (int m = 0; m < M; ++m) std::memset(C + m * ldc, 0, sizeof(float) * N);
    }
    return;
  }
  if (path == Bf16GemmPath::kAuto) path = bf16GemmAutoPath();
  if (path == Bf16GemmPath::kNative && !bf16GemmNativeAvailable()) {
    throw NotSupported(
        "gemmBf16: the native path needs AVX512-BF16 (vdpbf16ps), which this CPU "
        "does not report");
  }
  if (path == Bf16GemmPath::kAmx && !bf16GemmAmxAvailable()) {
    throw NotSupported(
        "gemmBf16: the AMX path needs amx-tile and amx-bf16 in the CPU and the tile state "
        "granted by Linux (arch_prctl ARCH_REQ_XCOMP_PERM), which this process does not have");
  }
  switch (path) {
    case Bf16GemmPath::kAmx: detail::gemmAmx(M, N, K, A, B, C, ldc, beta); break;
    case Bf16GemmPath::kNative: gemmNative(M, N, K, A, B, C, ldc, beta); break;
    default: gemmWiden(M, N, K, A, B, C, ldc, beta); break;
  }
}

}  // namespace ds::runtime
