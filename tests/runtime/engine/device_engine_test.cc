// The device-resident engine (runtime/engine/device_engine.h) over the CPU ops, against the host
// ZeroEngine on the same toy model, data and gloo group: stages 0-2, fp32 and bf16, 1 and 2
// thread ranks. The engine's logic (partitions, reduction, norm, clipping, optimizer ranges,
// the all-gather, checkpoint shards) is device-agnostic, so this is where it is proven; the
// CUDA ops run the same calls on a GPU (scripts/gpu_check.sh).
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <vector>

#include "comm/process_group.h"
#include "comm/registry.h"
#include "comm/store/hash_store.h"
#include "runtime/engine/device_engine.h"
#include "runtime/tensor/ops.h"
#include "tests/support/spawn_ranks.h"
#include "tests/zero/toy_model.h"
#include "tests/zero/zero_ranks.h"

using namespace ds;

namespace {

struct Curve {
  std::vector<double> losses;
  std::vector<float> params;
  std::vector<float> expAvg;  // rank 0's exp_avg shard (device engine) for the checkpoint check
};

// Trains `steps` steps of the toy model on `world` thread ranks with either engine.
Curve train(bool device, int world, int stage, bool bf16, int steps = 6) {
  test::ToyModel m(3, 8, bf16);
  zero::ZeroOptions z;
  z.stage = stage;
  z.compute = bf16 ? DType::kBF16 : DType::kF32;
  z.reduceBucketSize = 40;  // several buckets on the host engine
  auto store = std::make_shared<comm::HashStore>();
  std::vector<Curve> per(static_cast<size_t>(world));
  test::runRanks(world, [&](int r) {
    comm::GroupOptions go;
    go.backend = "gloo";
    go.timeout = std::chrono::seconds(60);
    comm::ProcessGroup pg(comm::createBackend("gloo", store, r, world, go));
    auto ops = runtime::makeCpuOps();
    std::unique_ptr<zero::TrainingEngine> eng;
    std::unique_ptr<runtime::DeviceEngine> dev;
    std::unique_ptr<zero::ZeroEngine> host;
    if (device)
      dev = std::make_unique<runtime::DeviceEngine>(*ops, m.params, &pg, z, test::toyOptimizer());
    else host = std::make_unique<zero::ZeroEngine>(m.params, m.L, &pg, z, test::toyOptimizer());
    const auto init = m.init();
    const int rows = 12 / world;
    Curve& out = per[size_t(r)];
    auto run = [&](auto& e) {
      e.setParams(init.data());
      for (int s = 0; s < steps; ++s) {
        double loss = 0;
        for (int k = 0; k < 2; ++k) {
          e.beginStep(k == 1);
          loss += m.microStep(e, s, k, r * rows, rows) / 2;
        }
        auto st = e.step(1e-2f, 1.f, 1.0f);
        if (st.skipped) throw std::runtime_error("step skipped");
        out.losses.push_back(loss);
      }
      out.params.resize(e.numel());
      e.getParams(out.params.data());
      for (auto& t : e.optimizerShard())
        if (t.name == "exp_avg") out.expAvg.insert(out.expAvg.end(), t.data.begin(), t.data.end());
    };
    if (dev) run(*dev);
    else run(*host);
  });
  Curve c = per[0];
  for (int r = 1; r < world; ++r)
    for (size_t s = 0; s < c.losses.size(); ++s) c.losses[s] += per[size_t(r)].losses[s];
  for (auto& l : c.losses) l /= world;
  return c;
}

double maxRel(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

}  // namespace

TEST_CASE("device engine over cpu ops matches the host engine: stages 0-2, fp32, 1-2 ranks",
          "[multirank]") {
  for (int world : {1, 2})
    for (int stage : {0, 1, 2}) {
      INFO("world " << world << " stage " << stage);
      Curve host = train(false, world, stage, false);
      Curve dev = train(true, world, stage, false);
      REQUIRE(dev.losses.size() == host.losses.size());
      CHECK(test::maxRelDiff(dev.losses, host.losses) < 1e-6);
      CHECK(maxRel(dev.params, host.params) < 1e-6);
      CHECK(dev.losses.back() < dev.losses.front());  // it trains
    }
}

TEST_CASE("device engine over cpu ops matches the host engine in bf16 (fp32 master)",
          "[multirank]") {
  for (int world : {1, 2})
    for (int stage : {0, 2}) {
      INFO("world " << world << " stage " << stage);
      Curve host = train(false, world, stage, true);
      Curve dev = train(true, world, stage, true);
      CHECK(test::maxRelDiff(dev.losses, host.losses) < 1e-5);
      CHECK(maxRel(dev.params, host.params) < 1e-5);
    }
}

TEST_CASE("device engine refuses what it does not implement, naming it", "[unit]") {
  test::ToyModel m(2, 4);
  auto ops = runtime::makeCpuOps();
  zero::ZeroOptions z;
  z.stage = 3;
  CHECK_FALSE(runtime::DeviceEngine::handles(z, test::toyOptimizer()));
  CHECK_THROWS_WITH(runtime::DeviceEngine(*ops, m.params, nullptr, z, test::toyOptimizer()),
                    Catch::Contains("stage 3"));
  z.stage = 1;
  z.offloadOptimizer.device = "cpu";
  CHECK_FALSE(runtime::DeviceEngine::handles(z, test::toyOptimizer()));
}

TEST_CASE("device engine reports its flat device buffers in the memory table", "[unit]") {
  test::ToyModel m(2, 4);
  auto ops = runtime::makeCpuOps();
  zero::ZeroOptions z;
  z.compute = DType::kBF16;
  runtime::DeviceEngine eng(*ops, m.params, nullptr, z, test::toyOptimizer());
  const size_t n = eng.numel();
  const auto mem = eng.memory();
  CHECK(mem.at(zero::MemKind::kParams, zero::MemPlace::kDevice) == 2 * n);
  CHECK(mem.at(zero::MemKind::kGrads, zero::MemPlace::kDevice) == 4 * n);
  CHECK(mem.at(zero::MemKind::kOptimizerStates, zero::MemPlace::kDevice) == 12 * n);
  CHECK(mem.at(zero::MemKind::kParams, zero::MemPlace::kHost) == 0);
}
