// The device-resident engine (runtime/engine/device_engine.h) over the CPU ops, against the host
// ZeroEngine on the same toy model, data and gloo group: stages 0-2, fp32 and bf16, 1 and 2
// thread ranks (stage 3: device_stage3_test.cc). The engine's logic (partitions, reduction, norm,
// clipping, optimizer ranges, the all-gather, checkpoint shards, the buckets reduced during
// backward) is device-agnostic, so this is where it is proven; the CUDA ops run the same calls on a
// GPU (scripts/gpu_check.sh).
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

using Kind = zero::TraceEvent::Kind;

struct Curve {
  std::vector<double> losses;
  std::vector<float> params;
  std::vector<float> expAvg;  // rank 0's exp_avg shard (device engine) for the checkpoint check
  std::vector<std::vector<zero::TraceEvent>> trace;  // rank 0's device engine trace, per step
};

struct Setup {
  size_t bucket = 40;    // reduce_bucket_size: several buckets on either engine
  bool tieNext = false;  // E also read by block 1
  int steps = 6;
};

// Trains `steps` steps of the toy model on `world` thread ranks with either engine.
Curve train(bool device, int world, int stage, bool bf16, Setup setup = {}) {
  test::ToyModel m(3, 8, bf16, setup.tieNext);
  zero::ZeroOptions z;
  z.stage = stage;
  z.compute = bf16 ? DType::kBF16 : DType::kF32;
  z.reduceBucketSize = setup.bucket;
  const int steps = setup.steps;
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
    if (device) {
      dev = std::make_unique<runtime::DeviceEngine>(*ops, m.params, &pg, z, test::toyOptimizer());
      dev->enableTrace(r == 0);
    } else host = std::make_unique<zero::ZeroEngine>(m.params, m.L, &pg, z, test::toyOptimizer());
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
        if (dev) out.trace.push_back(dev->takeTrace());
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

// Index of the n-th (from 0) event of kind k with id, or -1.
long indexOf(const std::vector<zero::TraceEvent>& t, Kind k, int64_t id, int n = 0) {
  for (size_t i = 0; i < t.size(); ++i)
    if (t[i].kind == k && t[i].id == id && n-- == 0) return long(i);
  return -1;
}

long countIn(const std::vector<zero::TraceEvent>& t, Kind k, long from, long to) {
  long n = 0;
  for (long i = std::max(from, 0L); i < std::min(to, long(t.size())); ++i)
    n += t[size_t(i)].kind == k ? 1 : 0;
  return n;
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

TEST_CASE("device engine issues gradient buckets during backward and waits on them in step",
          "[multirank]") {
  // 7 params: E(8) W0(64) c0(8) W1(64) c1(8) W2(64) c2(8); buckets of <= 40 elements: c2, W2 in
  // afterBackward(2), c1, W1 in (1), c0, W0, E in (0).
  for (int stage : {0, 1, 2}) {
    INFO("stage " << stage);
    Setup setup;
    setup.steps = 3;
    Curve host = train(false, 2, stage, false, setup);
    Curve dev = train(true, 2, stage, false, setup);
    CHECK(test::maxRelDiff(dev.losses, host.losses) < 1e-6);
    CHECK(maxRel(dev.params, host.params) < 1e-6);
    REQUIRE(dev.trace.size() == 3);
    for (const auto& t : dev.trace) {
      // micro-step 0 (not the last): nothing issued during its backward at stages 0-1; stage 2
      // reduces every micro-step (DeepSpeed's stage 2, the host's FlatPartitionedStage): its 7
      // buckets go out as in the last one and are waited in afterBackward(0)
      const bool every = stage == 2;
      const long end0 = indexOf(t, Kind::kAfterBackward, 0, 0);
      const long end1 = indexOf(t, Kind::kAfterBackward, 0, 1);
      const long start1 = indexOf(t, Kind::kBeforeForward, 0, 1);
      REQUIRE(end0 >= 0);
      REQUIRE(start1 > end0);
      REQUIRE(end1 > start1);
      CHECK(countIn(t, Kind::kBucketIssued, 0, end0) == (every ? 4 : 0));
      CHECK(countIn(t, Kind::kBucketIssued, end0, start1) == (every ? 3 : 0));
      CHECK(countIn(t, Kind::kBucketWaited, end0, start1) == (every ? 7 : 0));
      // micro-step 1: 4 buckets out before block 0's backward began, 3 in its hook
      const long begin0 = indexOf(t, Kind::kBeforeBackward, 0, 1);
      CHECK(countIn(t, Kind::kBucketIssued, start1, begin0) == 4);
      CHECK(countIn(t, Kind::kBucketIssued, end1, long(t.size())) == 3);
      // the last micro-step's buckets are waited only in step(), after the backward, each once
      // and in issue order
      CHECK(countIn(t, Kind::kBucketWaited, start1, end1) == 0);
      std::vector<int64_t> issued, waited;
      for (const auto& e : t) {
        if (e.kind == Kind::kBucketIssued) {
          issued.push_back(e.id);
          CHECK(e.allreduce == (stage == 0));
        }
        if (e.kind == Kind::kBucketWaited) waited.push_back(e.id);
      }
      CHECK(waited == issued);
    }
  }
}

TEST_CASE("device engine reduces a tied parameter once, after its first block's backward",
          "[multirank]") {
  // E is read by blocks 0, 1 and 2; buckets of at most 8 elements: each parameter is its own
  // bucket, so E's is the 7th and last, issued in afterBackward(0). Reduced earlier, it would
  // miss blocks 0-1's contributions and the curves would part.
  for (int stage : {0, 2}) {
    INFO("stage " << stage);
    Setup setup;
    setup.bucket = 8;
    setup.tieNext = true;
    setup.steps = 3;
    Curve host = train(false, 2, stage, false, setup);
    Curve dev = train(true, 2, stage, false, setup);
    CHECK(test::maxRelDiff(dev.losses, host.losses) < 1e-6);
    CHECK(maxRel(dev.params, host.params) < 1e-6);
    for (const auto& t : dev.trace) {
      // one per parameter, per step (stage 2: per micro-step)
      CHECK(countIn(t, Kind::kBucketIssued, 0, long(t.size())) == (stage == 2 ? 14 : 7));
      const long begin0 = indexOf(t, Kind::kBeforeBackward, 0, 1);
      const long end0 = indexOf(t, Kind::kAfterBackward, 0, 1);
      CHECK(countIn(t, Kind::kBucketIssued, begin0, end0) == 0);
      CHECK(countIn(t, Kind::kBucketIssued, end0, long(t.size())) == 3);  // c0, W0, E
    }
  }
}

TEST_CASE("device engine refuses what it does not implement, naming it", "[unit]") {
  test::ToyModel m(2, 4);
  auto ops = runtime::makeCpuOps();
  zero::ZeroOptions z;
  z.stage = 3;
  CHECK(runtime::DeviceEngine::handles(z, test::toyOptimizer()));
  z.offloadParam.device = "cpu";
  CHECK_FALSE(runtime::DeviceEngine::handles(z, test::toyOptimizer()));
  CHECK_THROWS_WITH(runtime::DeviceEngine(*ops, m.params, nullptr, z, test::toyOptimizer()),
                    Catch::Contains("stage 3") && Catch::Contains("offload_param 'cpu'"));
  z = {};
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
