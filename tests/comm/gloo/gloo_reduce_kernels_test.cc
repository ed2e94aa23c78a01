// The gloo reduction kernels against a plain per-element reference: every length around the
// vector block size (blocked loop plus scalar tail), the three placements reduceFrom allows
// (dst separate, dst == a, dst == b), fp32/int32/int64, sum/max/min, NaN and signed zeros
// ordered as std::max/std::min order them (operand order must survive vectorization).
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "comm/gloo/reduce_kernels.h"

using namespace ds;
using namespace ds::comm;
using namespace ds::comm::gloo_impl;

namespace {

template <typename T>
T valueAt(int which, size_t i) {
  if constexpr (std::is_floating_point_v<T>) {
    if (i % 7 == 3) return which ? std::numeric_limits<T>::quiet_NaN() : T(1);
    if (i % 11 == 5) return which ? T(0) : -T(0);
    return T(0.25) * T((i * (which ? 5 : 3)) % 17) - T(2);
  } else {
    return T((i * (which ? 5 : 3)) % 17) - T(8);
  }
}

template <typename T>
T ref(ReduceOp op, T a, T b) {
  return op == ReduceOp::kMax ? std::max(a, b) : op == ReduceOp::kMin ? std::min(a, b) : a + b;
}

template <typename T>
std::string check(DType t) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{15}, size_t{16}, size_t{17}, size_t{31},
                   size_t{33}, size_t{1000}}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin}) {
      std::vector<T> a(n), b(n), want(n);
      for (size_t i = 0; i < n; ++i) {
        a[i] = valueAt<T>(0, i);
        b[i] = valueAt<T>(1, i);
        want[i] = ref(op, a[i], b[i]);
      }
      for (int place = 0; place < 4; ++place) {
        std::vector<T> x = a, y = b, d(n);
        if (place == 0) reduceFrom(d.data(), x.data(), y.data(), n, t, op);
        if (place == 1) reduceFrom(x.data(), x.data(), y.data(), n, t, op), d = x;
        if (place == 2) reduceFrom(y.data(), x.data(), y.data(), n, t, op), d = y;
        if (place == 3) reduceInto(x.data(), y.data(), n, t, op), d = x;
        if (n && std::memcmp(d.data(), want.data(), n * sizeof(T)) != 0) {
          return fmt::format("dtype {} n {} op {} placement {}", dtypeName(t), n, int(op), place);
        }
      }
    }
  }
  return "";
}

}  // namespace

TEST_CASE("gloo reduce kernels: blocked loops match a per-element reference bitwise", "[unit]") {
  CHECK(check<float>(DType::kF32) == "");
  CHECK(check<int32_t>(DType::kI32) == "");
  CHECK(check<int64_t>(DType::kI64) == "");
  std::vector<float> v(37);
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(i) - 5.f;
  std::vector<float> w = v;
  finishAvg(v.data(), v.size(), DType::kF32, ReduceOp::kAvg, 3);
  for (size_t i = 0; i < v.size(); ++i) CHECK(v[i] == w[i] / 3.f);
}
