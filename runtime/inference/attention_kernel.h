// One query's attention over a KV cache, the decoder's per-(row, head) inner loop:
//   y[d] = sum_j softmax_j(scale * q . K_j) V_j[d],  j in [0, len), d in [0, hs)
// with K_j = keys + j * stride (V likewise): the training model's max-subtracted softmax, the dot
// products, the exponentials (a polynomial within a few ulp of expf) and the weighted sum of V
// vectorised. ISA: AVX-512 (avx512f) where the
// CPU has it and hs is a multiple of 16, else the scalar loop (the decoder's former code); both can
// be asked for (tests). Sums run in a different order than the scalar loop: results agree to fp32
// rounding. scores: len floats of scratch. No allocation; thread-safe for distinct y/scores.
#pragma once

#include <cstddef>

namespace ds::runtime {

enum class AttentionIsa { kScalar, kAvx512 };

bool attentionIsaSupported(AttentionIsa isa);
// The ISA cachedAttention uses for hs (kAvx512 only where supported and hs % 16 == 0).
AttentionIsa attentionBestIsa(int hs);

struct AttentionRow {
  const float* q;       // [hs]
  const float* keys;    // row j at keys + j * stride
  const float* values;  // row j at values + j * stride
  size_t stride;
  int len;  // >= 1
  int hs;
  float scale;
};

// Throws InternalError when isa is not supported here or hs does not fit it.
void cachedAttention(float* y, float* scores, const AttentionRow& row, AttentionIsa isa);
inline void cachedAttention(float* y, float* scores, const AttentionRow& row) {
  cachedAttention(y, scores, row, attentionBestIsa(row.hs));
}

}  // namespace ds::runtime
