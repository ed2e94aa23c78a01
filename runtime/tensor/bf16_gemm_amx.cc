// AMX path of the bf16 gemm (see bf16_gemm_amx.h). Every function that touches tiles carries a
// target attribute, so the file builds with the project's generic flags; gemmBf16 calls in only
// after bf16GemmAmxAvailable(). Blocks of C are 32 x 32 (2 x 2 tiles: tmm0-3 accumulate, tmm4-5
// hold X, tmm6-7 hold Y), each summed over all of K in one pass, so no partial sums leave the
// tiles. GCC's tile intrinsics are asm statements without a memory clobber: kMemBarrier orders them
// against the plain loads and stores of the same scratch buffers.
#include "runtime/tensor/bf16_gemm_amx.h"

#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/log.h"
#include "runtime/tensor/bf16_gemm_kernel.h"
#include "runtime/tensor/kept_scratch.h"
#include "runtime/tensor/threads.h"

namespace ds::runtime::detail {
namespace {

#define DS_AMX_TARGET __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bf16")))
#define DS_AMX_BARRIER() asm volatile("" ::: "memory")

constexpr int kT = 16;           // rows of a tile; also bf16 pairs (words) per tile row
constexpr int kStepWords = 256;  // words of one Y tile (16 pairs x 16 columns)
constexpr long kArchReqXcompPerm = 0x1023;
constexpr long kXfeatureXtiledata = 18;

struct alignas(64) TileConfig {
  uint8_t palette = 1, startRow = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

DS_AMX_TARGET void loadConfig() {
  TileConfig cfg;
  for (int i = 0; i < 8; ++i) {
    cfg.colsb[i] = 64;
    cfg.rows[i] = kT;
  }
  DS_AMX_BARRIER();  // the intrinsic's asm names only 8 of cfg's 64 bytes as its input
  _tile_loadconfig(&cfg);
}

DS_AMX_TARGET void releaseTiles() { _tile_release(); }

// Where one 16 x 16 accumulator tile of C starts and ends: straight in C (stride ldc floats) or in
// a 16 x 16 scratch copied from and to C around the block.
struct CTile {
  float* ptr;
  long strideBytes;
};

// One block of MT x NT tiles over kSteps steps of 16 pairs. x0, x1: the X tiles' first rows,
// xld words per row; y: Y panels (tile j at y + j*panelWords), 256 words a step.
template <int MT, int NT>
DS_AMX_TARGET void block(int kSteps, const uint32_t* x0, const uint32_t* x1, long xld,
                         const uint32_t* y, long panelWords, const CTile (&c)[2][2], bool load) {
  const uint32_t* y0 = y;
  const uint32_t* y1 = y + panelWords;
  const long xs = xld * 4;
  DS_AMX_BARRIER();
  if (load) {
    _tile_loadd(0, c[0][0].ptr, c[0][0].strideBytes);
    if constexpr (NT > 1) _tile_loadd(1, c[0][1].ptr, c[0][1].strideBytes);
    if constexpr (MT > 1) _tile_loadd(2, c[1][0].ptr, c[1][0].strideBytes);
    if constexpr (MT > 1 && NT > 1) _tile_loadd(3, c[1][1].ptr, c[1][1].strideBytes);
  } else {
    _tile_zero(0);
    if constexpr (NT > 1) _tile_zero(1);
    if constexpr (MT > 1) _tile_zero(2);
    if constexpr (MT > 1 && NT > 1) _tile_zero(3);
  }
  for (int s = 0; s < kSteps; ++s) {
    _tile_loadd(4, x0 + s * kT, xs);
    _tile_loadd(6, y0 + s * kStepWords, 64);
    _tile_dpbf16ps(0, 4, 6);
    if constexpr (NT > 1) {
      _tile_loadd(7, y1 + s * kStepWords, 64);
      _tile_dpbf16ps(1, 4, 7);
    }
    if constexpr (MT > 1) {
      _tile_loadd(5, x1 + s * kT, xs);
      _tile_dpbf16ps(2, 5, 6);
      if constexpr (NT > 1) _tile_dpbf16ps(3, 5, 7);
    }
  }
  _tile_stored(0, c[0][0].ptr, c[0][0].strideBytes);
  if constexpr (NT > 1) _tile_stored(1, c[0][1].ptr, c[0][1].strideBytes);
  if constexpr (MT > 1) _tile_stored(2, c[1][0].ptr, c[1][0].strideBytes);
  if constexpr (MT > 1 && NT > 1) _tile_stored(3, c[1][1].ptr, c[1][1].strideBytes);
  DS_AMX_BARRIER();
}

// out[c * outLd + r] = in[r * inLd + c] for r < inRows, c < cols (a transpose of 32-bit words).
void transposeWords(uint32_t* out, long outLd, const uint32_t* in, long inLd, int inRows,
                    int cols) {
  for (int c = 0; c < cols; ++c) {
    uint32_t* row = out + c * outLd;
    for (int r = 0; r < inRows; ++r) row[r] = in[r * inLd + c];
  }
}

// X: rows [r0, r0 + 16) of the view as row words (dst row stride ld = kpPad), zero padded past
// rows and past kp.
void packX(uint32_t* dst, long ld, const GemmOperand& v, int r0, int rows, int K, int kpPad) {
  const int kp = (K + 1) / 2, n = std::min(kT, rows - r0);
  if (v.cs == 1) {
    if (v.isBf16) {
      packRowsBf16(dst, ld, static_cast<const uint16_t*>(v.data) + r0 * v.rs, v.rs, n, K);
    } else {
      packRowsF32(dst, ld, static_cast<const float*>(v.data) + r0 * v.rs, v.rs, n, K);
    }
    for (int r = 0; r < n; ++r) std::fill(dst + r * ld + kp, dst + r * ld + kpPad, 0u);
    for (int r = n; r < kT; ++r) std::fill(dst + r * ld, dst + r * ld + kpPad, 0u);
    return;
  }
  thread_local std::vector<uint32_t> panel;  // word (p, r) at p * 16 + r
  panel.resize(static_cast<size_t>(kp) * kT);
  if (v.isBf16) {
    packPanelBf16(panel.data(), kT, static_cast<const uint16_t*>(v.data), v.rs, v.cs, r0, rows, K);
  } else {
    packPanelF32(panel.data(), kT, static_cast<const float*>(v.data), v.rs, v.cs, r0, rows, K);
  }
  transposeWords(dst, ld, panel.data(), kT, kp, kT);
  for (int r = 0; r < kT; ++r) std::fill(dst + r * ld + kp, dst + r * ld + kpPad, 0u);
}

// Y: rows [r0, r0 + 16) of the view as one panel of kpPad pairs x 16 columns, zero padded.
void packY(uint32_t* dst, const GemmOperand& v, int r0, int rows, int K, int kpPad) {
  const int kp = (K + 1) / 2, n = std::min(kT, rows - r0);
  if (v.cs != 1) {
    if (v.isBf16) {
      packPanelBf16(dst, kT, static_cast<const uint16_t*>(v.data), v.rs, v.cs, r0, rows, K);
    } else {
      packPanelF32(dst, kT, static_cast<const float*>(v.data), v.rs, v.cs, r0, rows, K);
    }
    std::fill(dst + static_cast<size_t>(kp) * kT, dst + static_cast<size_t>(kpPad) * kT, 0u);
    return;
  }
  thread_local std::vector<uint32_t> words;  // row words, (r, p) at r * kp + p
  words.assign(static_cast<size_t>(kT) * kp, 0u);
  if (v.isBf16) {
    packRowsBf16(words.data(), kp, static_cast<const uint16_t*>(v.data) + r0 * v.rs, v.rs, n, K);
  } else {
    packRowsF32(words.data(), kp, static_cast<const float*>(v.data) + r0 * v.rs, v.rs, n, K);
  }
  transposeWords(dst, kT, words.data(), kp, kT, kp);
  std::fill(dst + static_cast<size_t>(kp) * kT, dst + static_cast<size_t>(kpPad) * kT, 0u);
}

DS_AMX_TARGET inline __mmask16 firstN(int n) {
  return n >= kT ? __mmask16(0xffff) : __mmask16((1u << n) - 1);
}

// Transposed tiles (X row r = C column, Y row q = C row): C rows [0, qn) of columns [0, rn) to and
// from a 16 x 16 scratch s[r * 16 + q], a gather or scatter of one C row at a time.
DS_AMX_TARGET void tileFromCT(float* s, const float* c, long ldc, int rn, int qn) {
  const __m512i idx =
      _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                         _mm512_set1_epi32(kT));
  const __mmask16 m = firstN(rn);
  for (int q = 0; q < kT; ++q) {
    const __m512 row = q < qn ? _mm512_maskz_loadu_ps(m, c + q * ldc) : _mm512_setzero_ps();
    _mm512_i32scatter_ps(s + q, idx, row, 4);
  }
}
DS_AMX_TARGET void tileToCT(const float* s, float* c, long ldc, int rn, int qn) {
  const __m512i idx =
      _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                         _mm512_set1_epi32(kT));
  const __mmask16 m = firstN(rn);
  for (int q = 0; q < qn; ++q) {
    _mm512_mask_storeu_ps(
        c + q * ldc, m,
        _mm512_mask_i32gather_ps(_mm512_setzero_ps(), __mmask16(0xffff), idx, s + q, 4));
  }
}

}  // namespace

bool bf16GemmAmxAvailable() {
  static const bool available = [] {
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("amx-tile") || !__builtin_cpu_supports("amx-bf16") ||
        !bf16GemmCpuHasAvx512Bf16()) {
      return false;
    }
    if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) {
      const int err = errno;
      DS_LOG_INFO("tensor",
                  "bf16 gemm: the CPU has AMX but Linux refused the tile state "
                  "(arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA): {}); the AVX512-BF16 kernel runs",
                  std::strerror(err));
      return false;
    }
    return true;
  }();
  return available;
}

void gemmAmx(int M, int N, int K, const GemmOperand& A, const GemmOperand& B, float* C, long ldc,
             float beta) {
  const int kp = (K + 1) / 2, kpPad = (kp + kT - 1) / kT * kT, kSteps = kpPad / kT;
  const bool transposed = B.isBf16 && B.cs == 1 && B.rs % 2 == 0 && K % (2 * kT) == 0 &&
                          reinterpret_cast<uintptr_t>(B.data) % 4 == 0;
  const GemmOperand& xv = transposed ? B : A;
  const GemmOperand& yv = transposed ? A : B;
  const int xRows = transposed ? N : M, yRows = transposed ? M : N;
  const int xTiles = (xRows + kT - 1) / kT, yTiles = (yRows + kT - 1) / kT;
  const long panelWords = static_cast<long>(kpPad) * kT;
  thread_local KeptScratch<uint32_t> xbuf, ybuf, xtail;
  const uint32_t* x = nullptr;
  long xld = kpPad;
  // In place, the last X tile is copied when it has fewer than 16 rows (reading 16 would overrun).
  const uint32_t* xLast = nullptr;
  if (transposed) {
    x = static_cast<const uint32_t*>(static_cast<const void*>(B.data));
    xld = B.rs / 2;
    if (N % kT != 0) {
      xtail.resized(static_cast<size_t>(kT) * xld);
      packX(xtail.data(), xld, B, (xTiles - 1) * kT, N, K, kpPad);
      xLast = xtail.data();
    }
  } else {
    xbuf.resized(static_cast<size_t>(xTiles) * kT * kpPad);
  }
  ybuf.resized(static_cast<size_t>(yTiles) * panelWords);
  uint32_t* xd = xbuf.data();  // thread_local: OpenMP workers must use these pointers
  uint32_t* yd = ybuf.data();
  if (!transposed) x = xd;
  const int xBlocks = (xTiles + 1) / 2, yBlocks = (yTiles + 1) / 2;
  // Y blocks in chunks of about 512 KiB of packed Y, so a chunk stays in L2 while X blocks stream.
  const int chunkBlocks = std::max(1, static_cast<int>((512L << 10) / (2L * panelWords * 4)));
  const int blocks = xBlocks * yBlocks;
  const long work = static_cast<long>(M) * N * K / 64;
  const bool load = beta != 0.0f;
#pragma omp parallel if (work >= kMinParallelWork && blocks > 1)
  {
    if (!transposed) {
#pragma omp for schedule(static) nowait
      for (int t = 0; t < xTiles; ++t)
        packX(xd + static_cast<size_t>(t) * kT * kpPad, kpPad, xv, t * kT, xRows, K, kpPad);
    }
#pragma omp for schedule(static) nowait
    for (int t = 0; t < yTiles; ++t) packY(yd + t * panelWords, yv, t * kT, yRows, K, kpPad);
#pragma omp barrier
    loadConfig();
    alignas(64) float scratch[2][2][kT * kT];
#pragma omp for schedule(static)
    for (int t = 0; t < blocks; ++t) {
      // Order: chunk of Y blocks, then X block, then Y block within the chunk.
      const int chunk = t / (xBlocks * chunkBlocks);
      const int inChunk = std::min(chunkBlocks, yBlocks - chunk * chunkBlocks);
      const int rem = t - chunk * xBlocks * chunkBlocks;
      const int xb = rem / inChunk, yb = chunk * chunkBlocks + rem % inChunk;
      const int mt = std::min(2, xTiles - 2 * xb), nt = std::min(2, yTiles - 2 * yb);
      CTile c[2][2] = {};
      bool viaScratch[2][2] = {};
      for (int i = 0; i < mt; ++i) {
        for (int j = 0; j < nt; ++j) {
          const int xr0 = (2 * xb + i) * kT, yr0 = (2 * yb + j) * kT;
          const bool full = xr0 + kT <= xRows && yr0 + kT <= yRows;
          if (!transposed && full) {
            c[i][j] = {C + static_cast<long>(xr0) * ldc + yr0, ldc * 4};
            continue;
          }
          viaScratch[i][j] = true;
          float* s = scratch[i][j];
          c[i][j] = {s, kT * 4};
          if (!load) continue;
          if (transposed) {
            tileFromCT(s, C + static_cast<long>(yr0) * ldc + xr0, ldc, std::min(kT, xRows - xr0),
                       std::min(kT, yRows - yr0));
            continue;
          }
          for (int r = 0; r < kT; ++r) {
            for (int q = 0; q < kT; ++q) {
              const bool in = xr0 + r < xRows && yr0 + q < yRows;
              s[r * kT + q] = in ? C[static_cast<long>(xr0 + r) * ldc + yr0 + q] : 0.0f;
            }
          }
        }
      }
      const uint32_t* x0 = x + static_cast<long>(2 * xb) * kT * xld;
      const uint32_t* x1 = x0 + kT * xld;
      if (xLast != nullptr && 2 * xb + mt == xTiles) (mt == 2 ? x1 : x0) = xLast;
      const uint32_t* yp = yd + 2L * yb * panelWords;
      if (mt == 2 && nt == 2) {
        block<2, 2>(kSteps, x0, x1, xld, yp, panelWords, c, load);
      } else if (mt == 2) {
        block<2, 1>(kSteps, x0, x1, xld, yp, panelWords, c, load);
      } else if (nt == 2) {
        block<1, 2>(kSteps, x0, x1, xld, yp, panelWords, c, load);
      } else {
        block<1, 1>(kSteps, x0, x1, xld, yp, panelWords, c, load);
      }
      for (int i = 0; i < mt; ++i) {
        for (int j = 0; j < nt; ++j) {
          if (!viaScratch[i][j]) continue;
          const int xr0 = (2 * xb + i) * kT, yr0 = (2 * yb + j) * kT;
          const int rn = std::min(kT, xRows - xr0), qn = std::min(kT, yRows - yr0);
          const float* s = scratch[i][j];
          if (transposed) {  // C row = Y row: walk C rows, gathering the tile's column
            tileToCT(s, C + static_cast<long>(yr0) * ldc + xr0, ldc, rn, qn);
          } else {
            for (int r = 0; r < rn; ++r) {
              float* out = C + static_cast<long>(xr0 + r) * ldc + yr0;
              for (int q = 0; q < qn; ++q) out[q] = s[r * kT + q];
            }
          }
        }
      }
    }
    releaseTiles();
  }  // omp parallel
}

}  // namespace ds::runtime::detail
