// Embedding forward/backward (see encoder.h).
#include "runtime/tensor/encoder.h"
#include "runtime/tensor/threads.h"

#include <cstddef>
#include <cstdint>

namespace ds::runtime {
namespace {

// body(bt, lo, hi) for every position bt in order, per range [lo, hi) of 64 channels; the
// ranges are split over the OpenMP team, so each element is added to in (b, t) order by one
// thread (deterministic).
template <typename Body>
void forChannelChunks(int B, int T, int C, const Body& body) {
  constexpr int kChunk = 64;
  const int chunks = (C + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (long(B) * T * C >= kMinParallelWork)
  for (int c = 0; c < chunks; ++c) {
    const int lo = c * kChunk, hi = lo + kChunk < C ? lo + kChunk : C;
    for (int bt = 0; bt < B * T; ++bt) body(bt, lo, hi);
  }
}

}  // namespace

void encoderForward(float* out, const int32_t* tokens, const float* wte, const float* wpe, int B,
                    int T, int C) {
#pragma omp parallel for schedule(static) if (long(B) * T * C >= kMinParallelWork)
  for (int bt = 0; bt < B * T; ++bt) {
    int t = bt % T;
    const float* e = wte + static_cast<size_t>(tokens[bt]) * C;
    const float* p = wpe + static_cast<size_t>(t) * C;
    float* o = out + static_cast<size_t>(bt) * C;
    for (int i = 0; i < C; ++i) o[i] = e[i] + p[i];
  }
}

void encoderBackward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens, int B,
                     int T, int C) {
  encoderBackwardRows(dwte, 0, INT64_MAX, dout, tokens, B, T, C);
  encoderBackwardPositions(dwpe, dout, B, T, C);
}

void encoderBackwardRows(float* dwteRows, int64_t first, int64_t rows, const float* dout,
                         const int32_t* tokens, int B, int T, int C) {
  forChannelChunks(B, T, C, [&](int bt, int lo, int hi) {
    const int64_t row = int64_t{tokens[bt]} - first;
    if (row < 0 || row >= rows) return;
    const float* d = dout + static_cast<size_t>(bt) * C;
    float* e = dwteRows + static_cast<size_t>(row) * C;
    for (int i = lo; i < hi; ++i) e[i] += d[i];
  });
}

void encoderBackwardPositions(float* dwpe, const float* dout, int B, int T, int C) {
  forChannelChunks(B, T, C, [&](int bt, int lo, int hi) {
    const float* d = dout + static_cast<size_t>(bt) * C;
    float* p = dwpe + static_cast<size_t>(bt % T) * C;
    for (int i = lo; i < hi; ++i) p[i] += d[i];
  });
}

}  // namespace ds::runtime
