// Helpers the CUDA op tests share: whether a device is visible (the [gpu] cases skip without
// one), the relative error rule of every kernel comparison (||got - ref|| / ||ref||, NaN in
// got gives NaN so a poisoned output never passes), and the host side of 16-bit storage (bf16 or
// fp16 words to and from float, the host's rounding). Not a test of its own.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/dtype.h"
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

// x as the device holds it in dt (fp32: x; bf16 / fp16: rounded to nearest even).
inline float roundTo(float x, DType dt) {
  if (dt == DType::kBF16) return bf16ToFloat(floatToBf16(x));
  if (dt == DType::kF16) return fp16ToFloat(floatToFp16(x));
  return x;
}

// The 16-bit words of v in dt (kBF16 or kF16), and back to float.
inline std::vector<uint16_t> toWords16(const std::vector<float>& v, DType dt) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    out[i] = dt == DType::kF16 ? floatToFp16(v[i]).bits : floatToBf16(v[i]).bits;
  return out;
}
inline std::vector<float> fromWords16(const std::vector<uint16_t>& w, DType dt) {
  std::vector<float> out(w.size());
  for (size_t i = 0; i < w.size(); ++i)
    out[i] = dt == DType::kF16 ? fp16ToFloat(fp16{w[i]}) : bf16ToFloat(bf16{w[i]});
  return out;
}

}  // namespace ds::test
