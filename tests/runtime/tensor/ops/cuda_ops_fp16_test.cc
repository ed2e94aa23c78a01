// CudaOps::roundToFp16 (the kernel of fp16 mode on the device) against the host's roundToFp16,
// bit for bit: edge values (fp16's max, the overflow boundary 65520, subnormals, ties, inf) and
// random bit patterns over the fp32 range. [gpu]: skips without a CUDA device.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "runtime/tensor/fp16_round.h"
#include "runtime/tensor/ops.h"
#include "tests/runtime/tensor/ops/cuda_test_util.h"
#include "tests/support/skip.h"

TEST_CASE("cuda roundToFp16 equals the host rounding bit for bit", "[gpu]") {
  if (!ds::test::haveCudaDevice()) DS_SKIP("no CUDA device");
  auto ops = ds::runtime::makeCudaOps(0);
  std::vector<float> x = {0.f,
                          -0.f,
                          1.f,
                          0.1f,
                          -0.1f,
                          65504.f,
                          65519.f,
                          65520.f,
                          -65520.f,
                          1e6f,
                          3e38f,
                          6.1e-5f,
                          6.0e-5f,
                          3e-8f,
                          2.98e-8f,
                          5.96e-8f,
                          1e-9f,
                          -1e-7f,
                          1.00048828125f,
                          1.000732421875f,
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity()};
  uint32_t state = 777;
  for (int i = 0; i < 100000; ++i) {
    state = state * 1664525u + 1013904223u;
    float f;
    std::memcpy(&f, &state, 4);
    if (std::isfinite(f)) x.push_back(f);
    x.push_back(std::ldexp(float(state % 4096) / 4096.f, int(state % 48) - 30));
  }
  std::vector<float> want = x;
  ds::runtime::roundToFp16(want.data(), want.size());
  ds::runtime::OpsBuffer buf(*ops, x.size() * sizeof(float), "roundToFp16 test input");
  ops->upload(buf.get(), x.data(), x.size() * sizeof(float));
  ops->roundToFp16(buf.as<float>(), x.size());
  std::vector<float> got(x.size());
  ops->download(got.data(), buf.get(), got.size() * sizeof(float));
  size_t bad = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], 4) == 0) continue;
    if (++bad <= 5) UNSCOPED_INFO("x = " << x[i] << ": cuda " << got[i] << ", host " << want[i]);
  }
  CHECK(bad == 0);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  ops->upload(buf.get(), &nan, sizeof(float));
  ops->roundToFp16(buf.as<float>(), 1);
  float back = 0;
  ops->download(&back, buf.get(), sizeof(float));
  CHECK(std::isnan(back));
}
