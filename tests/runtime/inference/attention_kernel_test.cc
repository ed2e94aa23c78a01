// cachedAttention (runtime/inference/attention_kernel.h) on every ISA this CPU has against an fp64
// softmax-attention of the same operands: head sizes that take the AVX-512 path (16, 64, 128) and
// ones that fall back to the scalar loop (24, 40), one position up to several hundred, cache rows
// wider than the head (stride > hs, as the decoder's [T, C] rows), scores scratch sized exactly,
// scores near 0 and spread widely (the vectorised exp's small results and underflow clamp).
// Also: an unsupported head size on the AVX-512 ISA is refused.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/error.h"
#include "runtime/inference/attention_kernel.h"

using namespace ds::runtime;

namespace {

std::vector<float> randomVec(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> out(count);
  for (float& val : out) val = dist(rng);
  return out;
}

std::vector<double> reference(const AttentionRow& row) {
  std::vector<double> scores(size_t(row.len));
  double mx = -INFINITY;
  for (int j = 0; j < row.len; ++j) {
    double dot = 0;
    for (int d = 0; d < row.hs; ++d)
      dot += double(row.q[d]) * row.keys[size_t(j) * row.stride + size_t(d)];
    scores[size_t(j)] = dot * row.scale;
    mx = std::max(mx, scores[size_t(j)]);
  }
  double sum = 0;
  for (double& val : scores) sum += (val = std::exp(val - mx));
  std::vector<double> out(size_t(row.hs), 0.0);
  for (int j = 0; j < row.len; ++j)
    for (int d = 0; d < row.hs; ++d)
      out[size_t(d)] += scores[size_t(j)] / sum * row.values[size_t(j) * row.stride + size_t(d)];
  return out;
}

}  // namespace

TEST_CASE("cachedAttention matches an fp64 reference on every ISA", "[unit]") {
  std::vector<AttentionIsa> isas = {AttentionIsa::kScalar};
  if (attentionIsaSupported(AttentionIsa::kAvx512)) isas.push_back(AttentionIsa::kAvx512);
  else WARN("no AVX-512 on this CPU: the scalar loop only");
  const double unit = std::ldexp(1.0, -24);
  for (const int hs : {16, 24, 40, 64, 128})
    for (const int len : {1, 2, 15, 17, 64, 333})
      for (const float boost : {1.0f, 40.0f}) {    // 40: scores spread widely, small exps underflow
        const size_t stride = size_t(hs) * 3 + 5;  // wider than the head, not a multiple of 16
        const auto keys = randomVec(stride * size_t(len), 11u + uint32_t(hs));
        const auto values = randomVec(stride * size_t(len), 13u + uint32_t(len));
        const auto query = randomVec(size_t(hs), 17u);
        AttentionRow row{};
        row.q = query.data();
        row.keys = keys.data() + 3;
        row.values = values.data() + 7;
        row.stride = stride;
        row.len = len;
        row.hs = hs;
        row.scale = boost / std::sqrt(float(hs));
        const auto ref = reference(row);
        // A score's fp32 error: its hs-term dot product's rounding, scaled.
        double scoreErr = 0.0;
        for (int j = 0; j < len; ++j) {
          double mag = 0.0;
          for (int d = 0; d < hs; ++d)
            mag += std::fabs(double(row.q[d]) * row.keys[size_t(j) * stride + size_t(d)]);
          scoreErr = std::max(scoreErr, (hs + 2) * unit * mag * row.scale);
        }
        // Each output is a convex combination of values in [-1, 1]: the weights' relative error
        // (scores, exp, the len-term sum) times at most 1, plus the weighted sum's rounding.
        const double tol = 4.0 * scoreErr + 8.0 * (len + hs + 8) * unit;
        for (const AttentionIsa isa : isas) {
          std::vector<float> out(static_cast<size_t>(hs), NAN), scores(static_cast<size_t>(len));
          if (isa == AttentionIsa::kAvx512 && hs % 16 != 0) {
            REQUIRE_THROWS_AS(cachedAttention(out.data(), scores.data(), row, isa),
                              ds::InternalError);
            continue;
          }
          cachedAttention(out.data(), scores.data(), row, isa);
          for (int d = 0; d < hs; ++d) {
            INFO("isa " << int(isa) << " hs " << hs << " len " << len << " boost " << boost << " d "
                        << d);
            REQUIRE(std::fabs(out[size_t(d)] - ref[size_t(d)]) <= tol);
          }
        }
      }
  CHECK(attentionBestIsa(24) == AttentionIsa::kScalar);
}
