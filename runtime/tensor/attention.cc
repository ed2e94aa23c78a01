// Causal self-attention forward/backward (see attention.h).
#include "runtime/tensor/attention.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "runtime/tensor/kept_scratch.h"
#include "runtime/tensor/sgemm.h"
#include "runtime/tensor/softmax_row.h"

namespace ds::runtime {

namespace {

// Heads are independent: with more than one (batch, head) pair the OpenMP team takes whole heads
// (each one's products single-threaded, sgemm.h's split stays off inside the region); one head
// alone gets the split products instead.
// Causal products run row block by row block: block [r0, r1) of the T x T scores needs the keys
// [0, r1) only, so the masked upper triangle is (mostly) never computed: at T = 256, 56% of the
// full products' FLOPs. Measured (one head pair loop, B = 2, T = 256, C = 768, 12 heads, one Zen 1
// thread): full products 33 + 71 ms forward + backward, blocks of 128 rows 22 + 29, 64: 18 + 23,
// 32: 16 + 21, 16: 16 + 21 (thinner panels cost the GEMM kernel what they skip).
constexpr int kCausalRows = 32;

// fn(r0, r1) for each row block [r0, r1) of T rows, in order.
template <class Fn>
void forEachRowBlock(int T, Fn&& fn) {
  for (int r0 = 0; r0 < T; r0 += kCausalRows) fn(r0, std::min(T, r0 + kCausalRows));
}

bool headsParallel(int B, int NH) { return long(B) * NH > 1 && omp_get_max_threads() > 1; }

void headForward(float* out, float* att, const float* qkv, int b, int h, int T, int C, int NH,
                 float scale) {
  const int hs = C / NH, C3 = 3 * C;
  const float* q = qkv + static_cast<size_t>(b) * T * C3 + h * hs;
  const float* k = q + C;
  const float* v = q + 2 * C;
  float* s = att + (static_cast<size_t>(b) * NH + h) * T * T;
  // Scores of each row block against the keys up to its last row only (the rest is masked).
  forEachRowBlock(T, [&](int r0, int r1) {
    sgemm(false, true, r1 - r0, r1, hs, scale, q + size_t(r0) * C3, C3, k, C3, 0.0f,
          s + size_t(r0) * T, T);
  });
  for (int t = 0; t < T; ++t) {
    float* row = s + static_cast<size_t>(t) * T;
    const size_t len = size_t(t) + 1;
    const float mx = rowMax(row, len);
    const float inv = static_cast<float>(1.0 / expShiftSum(row, len, mx));
    for (int j = 0; j <= t; ++j) row[j] *= inv;
    for (int j = t + 1; j < T; ++j) row[j] = 0.0f;
  }
  float* y = out + static_cast<size_t>(b) * T * C + h * hs;
  forEachRowBlock(T, [&](int r0, int r1) {
    sgemm(false, false, r1 - r0, hs, r1, 1.0f, s + size_t(r0) * T, T, v, C3, 0.0f,
          y + size_t(r0) * C, C);
  });
}

void headBackward(float* dqkv, float* ds, const float* dout, const float* qkv, const float* att,
                  int b, int h, int T, int C, int NH, float scale) {
  const int hs = C / NH, C3 = 3 * C;
  size_t base = static_cast<size_t>(b) * T * C3 + h * hs;
  const float* q = qkv + base;
  const float* k = q + C;
  const float* v = q + 2 * C;
  float* dq = dqkv + base;
  float* dk = dq + C;
  float* dv = dq + 2 * C;
  const float* s = att + (static_cast<size_t>(b) * NH + h) * T * T;
  const float* dy = dout + static_cast<size_t>(b) * T * C + h * hs;
  // dP = dY . V^T ; dV += P^T . dY (row block by row block: keys up to the block's last row)
  forEachRowBlock(T, [&](int r0, int r1) {
    sgemm(false, true, r1 - r0, r1, hs, 1.0f, dy + size_t(r0) * C, C, v, C3, 0.0f,
          ds + size_t(r0) * T, T);
    sgemm(true, false, r1, hs, r1 - r0, 1.0f, s + size_t(r0) * T, T, dy + size_t(r0) * C, C, 1.0f,
          dv, C3);
  });
  // Softmax backward, folding in the 1/sqrt(hs) of the scores: dS = P * (dP - <P, dP>) * scale.
  for (int t = 0; t < T; ++t) {
    const float* p = s + static_cast<size_t>(t) * T;
    float* d = ds + static_cast<size_t>(t) * T;
    float dot = 0.0f;
    for (int j = 0; j <= t; ++j) dot += p[j] * d[j];
    for (int j = 0; j <= t; ++j) d[j] = p[j] * (d[j] - dot) * scale;
    for (int j = t + 1; j < T; ++j) d[j] = 0.0f;
  }
  // dQ += dS . K ; dK += dS^T . Q
  forEachRowBlock(T, [&](int r0, int r1) {
    sgemm(false, false, r1 - r0, hs, r1, 1.0f, ds + size_t(r0) * T, T, k, C3, 1.0f,
          dq + size_t(r0) * C3, C3);
    sgemm(true, false, r1, hs, r1 - r0, 1.0f, ds + size_t(r0) * T, T, q + size_t(r0) * C3, C3, 1.0f,
          dk, C3);
  });
}

}  // namespace

void attentionForward(float* out, float* att, const float* qkv, int B, int T, int C, int NH) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(C / NH));
  const int pairs = B * NH;
#pragma omp parallel for schedule(dynamic, 1) if (headsParallel(B, NH))
  for (int i = 0; i < pairs; ++i) headForward(out, att, qkv, i / NH, i % NH, T, C, NH, scale);
}

void attentionBackward(float* dqkv, float* scratchTT, const float* dout, const float* qkv,
                       const float* att, int B, int T, int C, int NH) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(C / NH));
  const int pairs = B * NH;
  if (!headsParallel(B, NH)) {
    for (int i = 0; i < pairs; ++i)
      headBackward(dqkv, scratchTT, dout, qkv, att, i / NH, i % NH, T, C, NH, scale);
    return;
  }
#pragma omp parallel
  {
    // Thread 0 uses the caller's scratch; the others keep one T*T buffer each across calls.
    thread_local KeptScratch<float> own;
    float* ds = scratchTT;
    if (omp_get_thread_num() != 0) ds = own.atLeast(static_cast<size_t>(T) * T);
#pragma omp for schedule(dynamic, 1)
    for (int i = 0; i < pairs; ++i)
      headBackward(dqkv, ds, dout, qkv, att, i / NH, i % NH, T, C, NH, scale);
  }
}

}  // namespace ds::runtime
