// comm::CompressedAllreduce (1-bit Adam's error-compensated allreduce) on 2 and 3 thread ranks over
// real gloo: sign packing round-trips in numpy's bit order, one call equals a plain
// re-computation of DeepSpeed's two-phase algorithm from every rank's input, every rank gets the
// same bits, the wire bytes are exactly the signs and scales, and error feedback makes the
// average of many calls converge to the true average (the accumulated error is exactly what the
// error buffers hold), while the same calls without feedback stay biased.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "comm/compressed_allreduce.h"
#include "comm/process_group.h"
#include "comm/registry.h"
#include "comm/store/hash_store.h"
#include "tests/support/spawn_ranks.h"

using namespace ds;
using comm::CompressedAllreduce;

namespace {

std::vector<float> randomVector(size_t n, unsigned seed, float mean = 0.f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(mean, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

// Runs fn(rank, group) on `world` thread ranks sharing one gloo group each.
void onRanks(int world, const std::function<void(int, comm::ProcessGroup&)>& fn) {
  auto store = std::make_shared<comm::HashStore>();
  test::runRanks(world, [&](int r) {
    comm::GroupOptions options;
    options.timeout = std::chrono::seconds(60);
    comm::ProcessGroup group(comm::createBackend("gloo", store, r, world, options));
    fn(r, group);
  });
}

float rms(const std::vector<float>& v) {
  double sum = 0;
  for (float x : v) sum += double(x) * double(x);
  return v.empty() ? 0.f : float(std::sqrt(sum / double(v.size())));
}

float signOf(float x) { return x >= 0.f ? 1.f : -1.f; }

// DeepSpeed's compressed_allreduce for one tensor from all ranks' inputs, without feedback
// history (zero errors): pad, worker sign*rms, server average per chunk, server sign*rms.
std::vector<float> reference(const std::vector<std::vector<float>>& inputs, size_t padded) {
  const size_t world = inputs.size(), chunk = padded / world, n = inputs[0].size();
  std::vector<std::vector<float>> worker(world);
  for (size_t r = 0; r < world; ++r) {
    std::vector<float> x(inputs[r]);
    x.resize(padded, 0.f);
    const float scale = rms(x);
    for (auto& v : x) v = signOf(v) * scale;
    worker[r] = x;
  }
  std::vector<float> out(padded);
  for (size_t j = 0; j < world; ++j) {
    std::vector<float> server(chunk, 0.f);
    for (size_t r = 0; r < world; ++r)
      for (size_t i = 0; i < chunk; ++i)
        server[i] += signOf(worker[r][j * chunk + i]) *
                     (std::fabs(worker[r][j * chunk + i]) * (1.f / float(world)));
    const float scale = rms(server);
    for (size_t i = 0; i < chunk; ++i) out[j * chunk + i] = signOf(server[i]) * scale;
  }
  out.resize(n);
  return out;
}

}  // namespace

TEST_CASE("compressed allreduce: signs pack MSB first and unpack to +-scale", "[unit]") {
  const float first[8] = {1.f, -1.f, -2.f, -0.5f, -3.f, -1.f, -7.f, 0.25f};
  uint8_t byte = 0;
  comm::packSigns(first, 8, &byte);
  CHECK(byte == 0x81);
  const float zeros[8] = {0.f, -0.f, 1e-30f, -1e-30f, 0.f, 0.f, 0.f, 0.f};
  comm::packSigns(zeros, 8, &byte);
  CHECK(byte == 0xEF);  // +0 and -0 count as positive (DeepSpeed: sign(0) + 1 is true)
  auto x = randomVector(800, 3);
  std::vector<uint8_t> bits(100);
  comm::packSigns(x.data(), x.size(), bits.data());
  std::vector<float> y(800), z(800, 1.f);
  comm::unpackSigns(bits.data(), 800, 0.5f, y.data());
  comm::unpackSignsAdd(bits.data(), 800, 0.5f, z.data());
  for (size_t i = 0; i < x.size(); ++i) {
    CHECK(y[i] == (x[i] >= 0.f ? 0.5f : -0.5f));
    CHECK(z[i] == 1.f + y[i]);
  }
}

TEST_CASE("compressed allreduce: the error buffer holds exactly what compression dropped",
          "[unit]") {
  auto x = randomVector(64, 5, 0.3f);
  auto error = randomVector(64, 6);
  for (auto& e : error) e *= 0.1f;
  std::vector<float> compensated(64);
  for (size_t i = 0; i < 64; ++i) compensated[i] = x[i] + error[i];
  std::vector<uint8_t> bits(8);
  const float scale = comm::compressWithFeedback(x.data(), error.data(), 64, bits.data());
  CHECK(scale == Approx(rms(compensated)).epsilon(1e-6));
  std::vector<float> decoded(64);
  comm::unpackSigns(bits.data(), 64, scale, decoded.data());
  for (size_t i = 0; i < 64; ++i) {
    CHECK(x[i] == compensated[i]);
    CHECK(decoded[i] == signOf(compensated[i]) * scale);
    CHECK(decoded[i] + error[i] == Approx(compensated[i]).margin(1e-6));
  }
}

TEST_CASE("compressed allreduce: one call equals DeepSpeed's two phases; wire bytes are exact",
          "[multirank]") {
  for (int world : {2, 3}) {
    INFO("world " << world);
    const std::vector<size_t> segments = {5, 100, 37, 0, 1000};
    size_t count = 0;
    for (size_t s : segments) count += s;
    std::vector<std::vector<float>> inputs, outputs(static_cast<size_t>(world));
    for (int r = 0; r < world; ++r) inputs.push_back(randomVector(count, 10 + unsigned(r)));
    std::vector<uint64_t> sent(static_cast<size_t>(world)), perCall(static_cast<size_t>(world));
    size_t padded = 0, chunk = 0;
    onRanks(world, [&](int r, comm::ProcessGroup& group) {
      CompressedAllreduce allreduce(&group, segments);
      outputs[size_t(r)] = inputs[size_t(r)];
      allreduce.run(outputs[size_t(r)].data());
      sent[size_t(r)] = allreduce.bytesSent();
      perCall[size_t(r)] = allreduce.bytesPerCall();
      if (r == 0) padded = allreduce.paddedCount(), chunk = allreduce.chunkCount();
    });
    const size_t quantum = world == 2 ? 16 : 72;  // world * lcm(world, 8)
    size_t wantPadded = 0, offset = 0;
    std::vector<float> want;
    for (size_t s : segments) {
      const size_t p = (s + quantum - 1) / quantum * quantum;
      wantPadded += p;
      std::vector<std::vector<float>> part;
      for (int r = 0; r < world; ++r)
        part.emplace_back(inputs[size_t(r)].begin() + long(offset),
                          inputs[size_t(r)].begin() + long(offset + s));
      if (s) {
        auto ref = reference(part, p);
        want.insert(want.end(), ref.begin(), ref.end());
      }
      offset += s;
    }
    CHECK(padded == wantPadded);
    CHECK(chunk == wantPadded / size_t(world));
    for (int r = 0; r < world; ++r) {
      INFO("rank " << r);
      CHECK(outputs[size_t(r)] == outputs[0]);  // bitwise the same everywhere
      // Signs and one scale per tensor, to each peer, twice.
      const uint64_t want_bytes =
          2 * uint64_t(world - 1) * (wantPadded / size_t(world) / 8 + 4 * segments.size());
      CHECK(sent[size_t(r)] == want_bytes);
      CHECK(perCall[size_t(r)] == want_bytes);
    }
    REQUIRE(want.size() == count);
    for (size_t i = 0; i < count; ++i) {
      INFO("element " << i);
      CHECK(outputs[0][i] == Approx(want[i]).epsilon(1e-5));
    }
    // Against a plain fp32 allreduce: 2(w-1)/w * 4 bytes per element.
    const uint64_t plain = CompressedAllreduce::plainAllreduceBytes(count, world);
    CHECK(plain == 2 * uint64_t(world - 1) * count * 4 / uint64_t(world));
    CHECK(double(plain) / double(sent[0]) > 20.0);
  }
}

TEST_CASE("compressed allreduce: error feedback makes the average over calls unbiased",
          "[multirank]") {
  for (int world : {2, 3}) {
    INFO("world " << world);
    const size_t n = 144;  // a multiple of world * lcm(world, 8) at 2 and 3: no padding
    const int calls = 200;
    std::vector<std::vector<float>> inputs;
    for (int r = 0; r < world; ++r) inputs.push_back(randomVector(n, 20 + unsigned(r), 0.2f));
    std::vector<float> avg(n, 0.f);
    for (const auto& x : inputs)
      for (size_t i = 0; i < n; ++i) avg[i] += x[i] / float(world);
    // Per rank: the sum of outputs with feedback, the first output, the sum without feedback,
    // and the final error buffers.
    std::vector<std::vector<double>> sums(size_t(world), std::vector<double>(n, 0.0)),
        plainSums = sums;
    std::vector<std::vector<float>> first(static_cast<size_t>(world)),
        workerErr(static_cast<size_t>(world)), serverErr(static_cast<size_t>(world));
    onRanks(world, [&](int r, comm::ProcessGroup& group) {
      CompressedAllreduce withFeedback(&group, {n}), without(&group, {n});
      for (int k = 0; k < calls; ++k) {
        std::vector<float> a = inputs[size_t(r)], b = inputs[size_t(r)];
        withFeedback.run(a.data());
        without.resetErrors();
        without.run(b.data());
        if (k == 0) first[size_t(r)] = a;
        for (size_t i = 0; i < n; ++i) {
          sums[size_t(r)][i] += a[i];
          plainSums[size_t(r)][i] += b[i];
        }
      }
      workerErr[size_t(r)] = withFeedback.workerError();
      serverErr[size_t(r)] = withFeedback.serverError();
    });
    double oneShot = 0, withFb = 0, withoutFb = 0, identity = 0;
    const size_t chunk = n / size_t(world);
    for (size_t i = 0; i < n; ++i) {
      oneShot = std::max(oneShot, std::fabs(double(first[0][i]) - avg[i]));
      withFb = std::max(withFb, std::fabs(sums[0][i] / calls - avg[i]));
      withoutFb = std::max(withoutFb, std::fabs(plainSums[0][i] / calls - avg[i]));
      // sum of outputs = calls * avg - mean worker error - server error, exactly up to rounding.
      double meanWorker = 0;
      for (int r = 0; r < world; ++r) meanWorker += double(workerErr[size_t(r)][i]) / world;
      const double server = serverErr[i / chunk][i % chunk];
      identity =
          std::max(identity, std::fabs(sums[0][i] - double(calls) * avg[i] + meanWorker + server));
    }
    INFO("one call " << oneShot << ", mean of " << calls << " with feedback " << withFb
                     << ", without " << withoutFb << ", identity residual " << identity);
    CHECK(withFb < oneShot / 20);    // converges like 1/calls
    CHECK(withoutFb > oneShot / 2);  // without feedback the bias stays
    CHECK(identity < 1e-3 * calls);  // fp32 rounding of `calls` additions
    for (int r = 1; r < world; ++r) CHECK(sums[size_t(r)] == sums[0]);
  }
}
