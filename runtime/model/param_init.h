// Deterministic parameter initialization: a counter-based normal generator keyed by (seed,
// parameter index, element index), so values do not depend on thread count, on the order in
// which tensors are filled, or on which sub-range is asked for (partitioned construction fills
// one rank's shard: element j of a tensor has the same value whoever computes it). Not a general
// RNG.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ds::runtime {

// x[j] = N(0, std) for j in [0, n), from stream (seed, tensor).
void fillNormal(float* x, size_t n, float stddev, uint64_t seed, uint64_t tensor);
// x[j] = element (first + j) of stream (seed, tensor), j in [0, n): the same bits as fillNormal's
// x[first + j] for a tensor of any length.
void fillNormalAt(float* x, size_t first, size_t n, float stddev, uint64_t seed, uint64_t tensor);
void fillConstant(float* x, size_t n, float v);

// How one parameter is initialised: a constant, or N(0, stddev) from stream (seed, its index);
// elements at index >= zeroFrom are 0 (GPT-2's padded vocabulary rows).
struct ParamInitRule {
  bool normal = false;
  float value = 0.f;   // constant
  float stddev = 0.f;  // normal
  size_t zeroFrom = SIZE_MAX;
};

// Elements [first, first + n) of parameter `index` under rule, into x.
void fillParamRange(float* x, size_t first, size_t n, const ParamInitRule& rule, uint64_t seed,
                    uint64_t index);

}  // namespace ds::runtime
