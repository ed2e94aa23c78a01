// Lamb (zero/cpu_lamb.h) against reference steps computed independently in NumPy by
// tests/zero/lamb_reference.py from DeepSpeed's FusedLamb formula (float32 elements, as the kernel)
// (the constants below are its output): two steps each of a plain case, a trust ratio clamped at
// min_coeff, and a zero parameter (ratio 1). The optimizer partition applies one trust ratio per
// parameter extent.
#include <catch2/catch.hpp>

#include <vector>

#include "zero/cpu_lamb.h"
#include "zero/optimizer_partition.h"

using namespace ds::zero;

namespace {

struct Reference {
  std::vector<float> params;
  std::vector<std::vector<float>> grads;
  std::vector<float> wantParams, wantExpAvg, wantExpAvgSq, wantRatios;
};

LambConfig referenceConfig() {
  LambConfig cfg;
  cfg.lr = 0.01f;
  cfg.weightDecay = 0.01f;
  return cfg;  // betas 0.9/0.999, eps 1e-8, coefficients 10 / 0.01: the defaults
}

void checkClose(const std::vector<float>& got, const std::vector<float>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    CHECK(got[i] == Approx(want[i]).epsilon(2e-6).margin(1e-9));
  }
}

void runReference(const Reference& ref) {
  std::vector<float> params = ref.params, expAvg(params.size()), expAvgSq(params.size());
  std::vector<float> ratios;
  for (size_t t = 0; t < ref.grads.size(); ++t)
    ratios.push_back(lambStep(referenceConfig(), int64_t(t + 1), 0.5f, params.data(),
                              ref.grads[t].data(), expAvg.data(), expAvgSq.data(), params.size()));
  checkClose(params, ref.wantParams);
  checkClose(expAvg, ref.wantExpAvg);
  checkClose(expAvgSq, ref.wantExpAvgSq);
  checkClose(ratios, ref.wantRatios);
}

}  // namespace

TEST_CASE("Lamb: two steps match the NumPy reference of DeepSpeed's FusedLamb", "[unit]") {
  runReference(
      {{0.5f, -1.0f, 2.0f, 0.25f, -0.75f},
       {{0.2f, -0.4f, 1.0f, 0.0f, 0.6f}, {-0.1f, 0.3f, 0.8f, 0.2f, -0.4f}},
       {0.494980872f, -0.995756388f, 1.99173868f, 0.246686742f, -0.754449487f},
       {0.00400000112f, -0.00300000049f, 0.0850000232f, 0.0100000026f, 0.00700000115f},
       {1.24898397e-05f, 6.24591994e-05f, 0.000409744738f, 9.99987151e-06f, 0.000129908338f},
       {0.382407546f, 0.444492459f}});
}

TEST_CASE("Lamb: the trust ratio is clamped to min_coeff; a zero parameter gets ratio 1",
          "[unit]") {
  runReference({{0.001f, -0.002f, 0.003f},
                {{4.0f, -2.0f, 6.0f}, {3.0f, 1.0f, -5.0f}},
                {0.000801742077f, -0.00187336537f, 0.0028961862f},
                {0.330000073f, -0.0400000066f, 0.0200000107f},
                {0.0062459195f, 0.0012489839f, 0.0152408043f},
                {0.01f, 0.01f}});
  runReference({{0.0f, 0.0f, 0.0f},
                {{1.0f, 2.0f, 3.0f}, {1.0f, 1.0f, 1.0f}},
                {-0.0100999912f, -0.0100932112f, -0.0100871008f},
                {0.0950000212f, 0.14000003f, 0.185000047f},
                {0.000499743561f, 0.0012489839f, 0.00249771797f},
                {1.0f, 0.01f}});
}

TEST_CASE("Lamb: the optimizer partition gives each parameter its own trust ratio", "[unit]") {
  OptimizerOptions opt;
  opt.type = "Lamb";
  opt.lr = 0.01f;
  opt.weightDecay = 0.01f;
  std::vector<float> both = {0.5f, -1.0f, 2.0f, 0.25f, -0.75f, 0.001f, -0.002f, 0.003f};
  std::vector<float> grad = {0.2f, -0.4f, 1.0f, 0.0f, 0.6f, 4.0f, -2.0f, 6.0f};
  OptimizerPartition part(both.size(), opt, OffloadOptions{}, 1 << 20, both.data(), 0);
  part.setSegments({{0, 5, true}, {5, 3, true}});
  part.update(grad.data(), both.size(), 0.5f, opt.lr, 1, {}, nullptr);
  // each extent alone, as lambStep computes it
  std::vector<float> first = {0.5f, -1.0f, 2.0f, 0.25f, -0.75f}, second = {0.001f, -0.002f, 0.003f};
  std::vector<float> m1(5), v1(5), m2(3), v2(3);
  lambStep(referenceConfig(), 1, 0.5f, first.data(), grad.data(), m1.data(), v1.data(), 5);
  lambStep(referenceConfig(), 1, 0.5f, second.data(), grad.data() + 5, m2.data(), v2.data(), 3);
  first.insert(first.end(), second.begin(), second.end());
  CHECK(both == first);
  CHECK(part.stateNames() == std::vector<std::string>{"fp32", "exp_avg", "exp_avg_sq"});
}
