// CudaOps' Adam, AdamW and SGD [gpu] against the CPU engine's scalar path (zero::adamStep /
// sgdStep with Isa::kScalar, one range at a time, weight decay 0 where a range has decay off):
// params, optimizer states and the bf16 copy must be BIT-identical after several steps, and the
// elements between ranges untouched. Skips without a CUDA device.
#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "ds/config.h"
#include "runtime/tensor/ops.h"
#include "tests/runtime/tensor/ops/cuda_test_util.h"
#include "tests/support/skip.h"
#include "zero/cpu_adam.h"

#if DS_HAVE_CUDA_KERNELS
#include <cuda_runtime.h>
#endif

namespace {

using ds::runtime::AdamStep;
using ds::runtime::DecayRange;
using ds::runtime::Ops;
using ds::runtime::OpsBuffer;
using ds::runtime::SgdStep;

using ds::test::haveCudaDevice;

std::vector<float> randomVec(size_t n, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// A few ranges with gaps between them, decay alternating; or many small ones (more than one
// launch's table).
std::vector<DecayRange> makeRanges(bool many, size_t* total) {
  std::vector<DecayRange> ranges;
  size_t at = 3;  // a gap before the first range too
  const int count = many ? 150 : 5;
  for (int r = 0; r < count; ++r) {
    const size_t size = many ? size_t(1 + (r * 37) % 50) : size_t(r == 2 ? 1 : 1000 + 777 * r);
    ranges.push_back({at, size, r % 2 == 0});
    at += size + (r % 3);  // gaps of 0, 1 and 2 elements
  }
  *total = at + 5;
  return ranges;
}

template <class T>
OpsBuffer uploaded(Ops& ops, const std::vector<T>& host, const char* what) {
  OpsBuffer buf(ops, host.size() * sizeof(T), what);
  ops.upload(buf.get(), host.data(), buf.bytes());
  return buf;
}

template <class T>
std::vector<T> downloaded(Ops& ops, const OpsBuffer& buf, size_t n) {
  std::vector<T> host(n);
  ops.download(host.data(), buf.get(), n * sizeof(T));
  return host;
}

template <class T>
bool bitIdentical(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// First differing element, for the failure message.
size_t firstDiff(const std::vector<float>& a, const std::vector<float>& b) {
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], 4) != 0) return i;
  return a.size();
}

void checkAdam(Ops& ops, AdamStep step, bool many, bool withOut16, uint32_t seed) {
  INFO("adamw=" << step.adamw << " wd=" << step.weightDecay << " biasCorrection="
                << step.biasCorrection << " many=" << many << " out16=" << withOut16);
  size_t n = 0;
  const auto ranges = makeRanges(many, &n);
  std::mt19937 rng(seed);
  auto params = randomVec(n, rng, -1.f, 1.f);
  auto m = randomVec(n, rng, -0.01f, 0.01f);
  auto v = randomVec(n, rng, 0.f, 1e-4f);
  std::vector<ds::bf16> out16(n, ds::bf16{0x7fc1});
  OpsBuffer dP = uploaded(ops, params, "params"), dM = uploaded(ops, m, "m"),
            dV = uploaded(ops, v, "v"), d16 = uploaded(ops, out16, "out16");
  for (int s = 1; s <= 3; ++s) {
    step.step = s;
    const auto grads = randomVec(n, rng, -2.f, 2.f);
    OpsBuffer dG = uploaded(ops, grads, "grads");
    ops.adam(dP.as<float>(), dM.as<float>(), dV.as<float>(), dG.as<float>(),
             withOut16 ? d16.as<ds::bf16>() : nullptr, ranges.data(), int(ranges.size()), step);
    for (const DecayRange& r : ranges) {
      ds::zero::AdamConfig cfg;
      cfg.lr = step.lr;
      cfg.beta1 = step.beta1;
      cfg.beta2 = step.beta2;
      cfg.eps = step.eps;
      cfg.weightDecay = r.decay ? step.weightDecay : 0.f;
      cfg.adamwMode = step.adamw;
      cfg.biasCorrection = step.biasCorrection;
      ds::zero::Half16Out half;
      if (withOut16) half = {ds::DType::kBF16, &out16[r.offset].bits};
      ds::zero::adamStep(ds::zero::Isa::kScalar, cfg, step.step, step.gradScale,
                         params.data() + r.offset, grads.data() + r.offset, m.data() + r.offset,
                         v.data() + r.offset, r.size, half, 1);
    }
    const auto gotP = downloaded<float>(ops, dP, n);
    const auto gotM = downloaded<float>(ops, dM, n);
    const auto gotV = downloaded<float>(ops, dV, n);
    const auto got16 = downloaded<ds::bf16>(ops, d16, n);
    INFO("step " << s << " first param diff at " << firstDiff(gotP, params) << " of " << n);
    CHECK(bitIdentical(gotP, params));
    CHECK(bitIdentical(gotM, m));
    CHECK(bitIdentical(gotV, v));
    CHECK(bitIdentical(got16, out16));
  }
}

void checkSgd(Ops& ops, SgdStep step, bool many, bool withOut16, uint32_t seed) {
  INFO("momentum=" << step.momentum << " wd=" << step.weightDecay << " many=" << many
                   << " out16=" << withOut16);
  size_t n = 0;
  const auto ranges = makeRanges(many, &n);
  std::mt19937 rng(seed);
  auto params = randomVec(n, rng, -1.f, 1.f);
  auto buf = randomVec(n, rng, -0.1f, 0.1f);
  std::vector<ds::bf16> out16(n, ds::bf16{0x7fc1});
  const bool useBuf = step.momentum != 0.f;
  OpsBuffer dP = uploaded(ops, params, "params"), dB = uploaded(ops, buf, "momentum"),
            d16 = uploaded(ops, out16, "out16");
  for (int s = 1; s <= 3; ++s) {
    const auto grads = randomVec(n, rng, -2.f, 2.f);
    OpsBuffer dG = uploaded(ops, grads, "grads");
    ops.sgd(dP.as<float>(), useBuf ? dB.as<float>() : nullptr, dG.as<float>(),
            withOut16 ? d16.as<ds::bf16>() : nullptr, ranges.data(), int(ranges.size()), step);
    for (const DecayRange& r : ranges) {
      ds::zero::SgdConfig cfg;
      cfg.lr = step.lr;
      cfg.momentum = step.momentum;
      cfg.weightDecay = r.decay ? step.weightDecay : 0.f;
      ds::zero::Half16Out half;
      if (withOut16) half = {ds::DType::kBF16, &out16[r.offset].bits};
      ds::zero::sgdStep(ds::zero::Isa::kScalar, cfg, step.gradScale, params.data() + r.offset,
                        grads.data() + r.offset, useBuf ? buf.data() + r.offset : nullptr, r.size,
                        half, 1);
    }
    INFO("step " << s);
    CHECK(bitIdentical(downloaded<float>(ops, dP, n), params));
    CHECK(bitIdentical(downloaded<float>(ops, dB, n), buf));
    CHECK(bitIdentical(downloaded<ds::bf16>(ops, d16, n), out16));
  }
}

}  // namespace

TEST_CASE("cuda adam and adamw are bit-identical to the scalar CPU engine", "[gpu]") {
  if (!haveCudaDevice()) DS_SKIP("no CUDA device");
  auto ops = ds::runtime::makeCudaOps(0);
  AdamStep adamw;
  adamw.lr = 3e-3f;
  adamw.weightDecay = 0.1f;
  adamw.gradScale = 0.37f;
  AdamStep adam = adamw;
  adam.adamw = false;
  adam.weightDecay = 0.01f;
  adam.beta2 = 0.95f;
  AdamStep plain = adamw;
  plain.weightDecay = 0.f;
  plain.biasCorrection = false;
  plain.eps = 1e-6f;
  uint32_t seed = 1;
  for (const AdamStep& step : {adamw, adam, plain})
    for (bool many : {false, true})
      for (bool out16 : {false, true}) checkAdam(*ops, step, many, out16, seed++);
}

TEST_CASE("cuda sgd is bit-identical to the scalar CPU engine", "[gpu]") {
  if (!haveCudaDevice()) DS_SKIP("no CUDA device");
  auto ops = ds::runtime::makeCudaOps(0);
  SgdStep momentum;
  momentum.lr = 0.05f;
  momentum.momentum = 0.9f;
  momentum.weightDecay = 1e-3f;
  momentum.gradScale = 0.5f;
  SgdStep plain;
  plain.lr = 0.1f;
  uint32_t seed = 100;
  for (const SgdStep& step : {momentum, plain})
    for (bool many : {false, true})
      for (bool out16 : {false, true}) checkSgd(*ops, step, many, out16, seed++);
}
