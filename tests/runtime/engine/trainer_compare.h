// Comparisons the layout tests (trainer_pipeline_test, trainer_tensor_test, trainer_pxt_test)
// make between a parallel run and the single rank's: the worst relative difference of two
// series, the worst weight difference relative to the largest weight, a checkpoint's exported
// single file read back in model order, and checkClose over a run's losses, evals, grad norms
// and weights (any RunOut with those members).
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/safetensors.h"
#include "tests/runtime/engine/engine_fixtures.h"

namespace ds::test {

template <typename T>
double worstRel(const std::vector<T>& got, const std::vector<T>& want) {
  REQUIRE(got.size() == want.size());
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i)
    worst = std::max(worst, relDiff(double(got[i]), double(want[i])));
  return worst;
}

// Weights: the largest difference relative to the largest weight (a relative difference per
// element is meaningless for values that cross zero).
inline double worstWeight(const std::vector<float>& got, const std::vector<float>& want) {
  REQUIRE(got.size() == want.size());
  double scale = 0, worst = 0;
  for (float value : want) scale = std::max(scale, double(std::fabs(value)));
  for (size_t i = 0; i < got.size(); ++i)
    worst = std::max(worst, std::fabs(double(got[i]) - double(want[i])));
  return worst / scale;
}

// Losses and evals within rel, grad norms within 10 x rel, weights within `weights`.
template <typename RunOut>
void checkClose(const RunOut& got, const RunOut& want, double rel, double weights,
                const std::string& what) {
  const double losses = worstRel(got.losses, want.losses);
  const double evals = worstRel(got.evals, want.evals);
  const double norms = worstRel(got.norms, want.norms);
  const double params = worstWeight(got.params, want.params);
  INFO(what << ": worst relative loss difference " << losses << ", eval " << evals << ", grad norm "
            << norms << ", weights " << params << " (allowed " << rel << ", " << weights
            << " for the weights)");
  CHECK(losses <= rel);
  CHECK(evals <= rel);
  CHECK(norms <= 10 * rel);
  CHECK(params <= weights);
}

// The exported single file's tensors, concatenated in the manifest's (the model's) order.
inline std::vector<float> exportedParams(const std::string& root, const std::string& tag,
                                         const std::string& outPath) {
  runtime::exportConsolidated(root, tag, outPath);
  const auto reader = runtime::CheckpointReader::open(root, tag);
  runtime::ckpt::SafetensorsReader file(outPath);
  std::vector<float> flat;
  for (const auto& info : reader->info().params) {
    const auto* entry = file.find(info.name);
    REQUIRE(entry != nullptr);
    std::vector<float> values(entry->numel);
    file.readF32(*entry, 0, values.size(), values.data());
    flat.insert(flat.end(), values.begin(), values.end());
  }
  return flat;
}

}  // namespace ds::test
