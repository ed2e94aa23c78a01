// Helpers the CUDA op tests share: whether a device is visible (the [gpu] cases skip without
// one) and the relative error rule of every kernel comparison (||got - ref|| / ||ref||, NaN in
// got gives NaN so a poisoned output never passes). Not a test of its own.
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

#include "ds/config.h"

#if DS_HAVE_CUDA_KERNELS
#include <cuda_runtime.h>
#endif

namespace ds::test {

inline bool haveCudaDevice() {
#if DS_HAVE_CUDA_KERNELS
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
#else
  return false;
#endif
}

// Over the elements where keep(i).
template <class Keep>
double relError(const std::vector<float>& got, const std::vector<float>& ref, Keep keep) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!keep(i)) continue;
    const double d = double(got[i]) - double(ref[i]);
    num += d * d;
    den += double(ref[i]) * double(ref[i]);
  }
  return std::sqrt(num) / std::sqrt(den);
}

inline double relError(const std::vector<float>& got, const std::vector<float>& ref) {
  return relError(got, ref, [](size_t) { return true; });
}

}  // namespace ds::test
