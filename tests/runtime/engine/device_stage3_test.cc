// ZeRO stage 3 on the device engine (runtime/engine/device_stage3.h, device_gatherer.h) over the
// CPU ops, against the host ZeroEngine's stage 3 on the same toy model, data and gloo group: fp32
// and bf16, 1-3 thread ranks, gradient accumulation, tied parameters, the prefetch seen in the
// trace, checkpoints moved between the two engines, and the memory table. The trainer-level
// GPT-2 runs are in trainer_device_test.cc.
#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
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

// Every rank's optimizer shards gathered into full vectors, one per state name.
struct FullState {
  std::mutex mu;
  std::map<std::string, std::vector<float>> byName;
  std::vector<float> params;
  int64_t steps = 0;
  void add(const std::vector<zero::TrainingEngine::ShardTensor>& shard, size_t numel) {
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& t : shard) {
      auto& full = byName[t.name];
      full.resize(numel);
      std::copy(t.data.begin(), t.data.end(), full.begin() + long(t.offset));
    }
  }
};

struct Setup {
  int layers = 3, width = 8;
  bool bf16 = false, tieNext = false;
  size_t bucket = 40;
  size_t persistence = 0;       // every parameter gathered per block
  size_t prefetch = 50000000;   // stage3_prefetch_bucket_size
  size_t maxLive = 1000000000;  // stage3_max_live_parameters
  int steps = 4, startStep = 0, gas = 2;
  bool evalForward = false;   // a forward without backward (an evaluation) before each step
  FullState* load = nullptr;  // start from this checkpoint
  FullState* save = nullptr;  // the checkpoint after the last step
};

struct Curve {
  std::vector<double> losses;
  std::vector<float> params;
  std::vector<std::vector<zero::TraceEvent>> trace;  // rank 0's device engine trace, per step
  std::vector<zero::MemoryReport> mem;               // per rank
};

zero::ZeroOptions optionsFor(const Setup& s, int stage) {
  zero::ZeroOptions z;
  z.stage = stage;
  z.compute = s.bf16 ? DType::kBF16 : DType::kF32;
  z.reduceBucketSize = s.bucket;
  z.paramPersistenceThreshold = s.persistence;
  z.prefetchBucketSize = s.prefetch;
  z.maxLiveParameters = s.maxLive;
  return z;
}

// Trains the toy model on `world` gloo thread ranks with either engine at `stage`.
Curve train(bool device, int world, const Setup& s, int stage = 3) {
  test::ToyModel m(s.layers, s.width, s.bf16, s.tieNext);
  const zero::ZeroOptions z = optionsFor(s, stage);
  auto store = std::make_shared<comm::HashStore>();
  std::vector<Curve> per(static_cast<size_t>(world));
  test::runRanks(world, [&](int r) {
    comm::GroupOptions go;
    go.backend = "gloo";
    go.timeout = std::chrono::seconds(60);
    comm::ProcessGroup pg(comm::createBackend("gloo", store, r, world, go));
    comm::ProcessGroup* group = world > 1 ? &pg : nullptr;
    auto ops = runtime::makeCpuOps();
    std::unique_ptr<runtime::DeviceEngine> dev;
    std::unique_ptr<zero::ZeroEngine> host;
    if (device) {
      dev = std::make_unique<runtime::DeviceEngine>(*ops, m.params, group, z, test::toyOptimizer());
      dev->enableTrace(r == 0);
    } else host = std::make_unique<zero::ZeroEngine>(m.params, m.L, group, z, test::toyOptimizer());
    const int rows = 12 / world;
    Curve& out = per[size_t(r)];
    auto run = [&](auto& e) {
      out.mem.push_back(e.memory());
      if (s.load != nullptr) {
        e.setParams(s.load->params.data());
        e.loadOptimizerState(
            [&](size_t offset, size_t size, const std::string& name, float* into) {
              const auto& full = s.load->byName.at(name);
              std::copy(full.begin() + long(offset), full.begin() + long(offset + size), into);
            },
            s.load->steps);
      } else {
        const auto init = m.init();
        e.setParams(init.data());
      }
      if (dev) dev->takeTrace();
      for (int step = s.startStep; step < s.steps; ++step) {
        for (int b = 0; s.evalForward && b < m.L; ++b) {  // the blocks' hooks, as an eval's
          e.beforeForward(b);
          const size_t w = size_t(1 + 2 * b);  // W_b: published while its block runs
          if (e.table().value[w] == nullptr && e.table().value16[w] == nullptr)
            throw std::runtime_error("W" + std::to_string(b) + " not gathered in its eval block");
          e.afterForward(b);
        }
        double loss = 0;
        for (int k = 0; k < s.gas; ++k) {
          e.beginStep(k == s.gas - 1);
          loss += m.microStep(e, step, k, r * rows, rows) / s.gas;
        }
        auto st = e.step(1e-2f, 1.f, 1.0f);
        if (st.skipped) throw std::runtime_error("step skipped");
        out.losses.push_back(loss);
        if (dev) out.trace.push_back(dev->takeTrace());
      }
      out.params.resize(e.numel());
      e.getParams(out.params.data());
      if (s.save != nullptr) {
        s.save->add(e.optimizerShard(), e.numel());
        if (r == 0) {
          s.save->params = out.params;
          s.save->steps = e.stepCount();
        }
      }
    };
    if (dev) run(*dev);
    else run(*host);
  });
  Curve c = per[0];
  for (int r = 1; r < world; ++r)
    for (size_t i = 0; i < c.losses.size(); ++i) c.losses[i] += per[size_t(r)].losses[i];
  for (auto& l : c.losses) l /= world;
  for (int r = 1; r < world; ++r) c.mem.push_back(per[size_t(r)].mem[0]);
  return c;
}

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

// Whether the gather of `param` is issued inside [from, to) of t.
bool gatherIssuedIn(const std::vector<zero::TraceEvent>& t, int64_t param, long from, long to) {
  for (long i = std::max(from, 0L); i < std::min(to, long(t.size())); ++i)
    if (t[size_t(i)].kind == Kind::kGatherIssued && t[size_t(i)].id == param) return true;
  return false;
}

double maxRel(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return 1e300;
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

size_t deviceTotal(const zero::MemoryReport& m) {
  size_t sum = 0;
  for (int k = 0; k < 4; ++k) sum += m.bytes[k][int(zero::MemPlace::kDevice)];
  return sum;
}

}  // namespace

TEST_CASE("device engine stage 3 matches the host engine's stage 3: fp32, 1-3 ranks",
          "[multirank]") {
  for (int world : {1, 2, 3})
    for (size_t persistence : {size_t(0), size_t(8)}) {
      INFO("world " << world << " persistence threshold " << persistence);
      Setup s;
      s.persistence = persistence;  // 8: E and the biases stay gathered, the W are gathered
      const Curve host = train(false, world, s);
      const Curve dev = train(true, world, s);
      REQUIRE(dev.losses.size() == host.losses.size());
      CHECK(test::maxRelDiff(dev.losses, host.losses) < 1e-6);
      CHECK(maxRel(dev.params, host.params) < 1e-6);
      CHECK(dev.losses.back() < dev.losses.front());
      // The same reductions in the same order (buckets, norm): the host's trajectory bitwise.
      CHECK(dev.losses == host.losses);
      CHECK(dev.params == host.params);
    }
}

TEST_CASE("device engine stage 3 matches the host engine's stage 3 in bf16", "[multirank]") {
  for (int world : {1, 2}) {
    INFO("world " << world);
    Setup s;
    s.bf16 = true;
    const Curve host = train(false, world, s);
    const Curve dev = train(true, world, s);
    CHECK(test::maxRelDiff(dev.losses, host.losses) < 1e-5);
    CHECK(maxRel(dev.params, host.params) < 1e-5);
  }
}

TEST_CASE("device engine stage 3: tied parameters read by adjacent and distant blocks",
          "[multirank]") {
  // E is read by blocks 0, 1 and 2: gathered for each, its gradient reduced once per micro-step,
  // after block 0's backward; one parameter per bucket.
  for (int gas : {1, 3}) {
    INFO("gas " << gas);
    Setup s;
    s.tieNext = true;
    s.bucket = 8;
    s.gas = gas;
    const Curve host = train(false, 2, s);
    const Curve dev = train(true, 2, s);
    CHECK(test::maxRelDiff(dev.losses, host.losses) < 1e-6);
    CHECK(maxRel(dev.params, host.params) < 1e-6);
    for (const auto& t : dev.trace) {
      // 7 buckets per micro-step; E's (parameter 0) is among the 3 after block 0's backward.
      CHECK(countIn(t, Kind::kBucketIssued, 0, long(t.size())) == 7 * gas);
      const long end0 = indexOf(t, Kind::kAfterBackward, 0, gas - 1);
      const long begin0 = indexOf(t, Kind::kBeforeBackward, 0, gas - 1);
      CHECK(countIn(t, Kind::kBucketIssued, begin0, end0) == 0);
      CHECK(countIn(t, Kind::kBucketIssued, end0, long(t.size())) == 3);
    }
  }
}

TEST_CASE("device engine stage 3 after a forward without backward (an evaluation)", "[multirank]") {
  // The eval leaves the last block gathered (its backward never came): the next forward's
  // first block finds no free slot for its prefetch, and the last block's is reused after.
  for (size_t prefetch : {size_t(0), size_t(50000000)}) {
    INFO("prefetch " << prefetch);
    Setup s;
    s.evalForward = true;
    s.prefetch = prefetch;
    const Curve host = train(false, 2, s);
    const Curve dev = train(true, 2, s);
    CHECK(dev.losses == host.losses);
    CHECK(dev.params == host.params);
  }
}

TEST_CASE("device engine stage 3 prefetches the next block's gathers while a block computes",
          "[multirank]") {
  Setup s;
  s.layers = 4;
  s.steps = 2;
  s.gas = 1;
  const Curve dev = train(true, 2, s);
  REQUIRE(dev.trace.size() == 2);
  auto weight = [](int b) { return int64_t(1 + 2 * b); };  // W_b's parameter index
  for (const auto& t : dev.trace) {
    for (int b = 0; b + 1 < s.layers; ++b) {
      // W_{b+1}'s all-gather goes out before block b's forward ends (before its compute, in the
      // beforeForward hook), and is waited for only in block b+1's.
      const long begin = indexOf(t, Kind::kBeforeForward, b);
      const long end = indexOf(t, Kind::kAfterForward, b);
      CHECK(gatherIssuedIn(t, weight(b + 1), begin, end));
      CHECK(indexOf(t, Kind::kGatherWaited, weight(b + 1)) >
            indexOf(t, Kind::kBeforeForward, b + 1));
    }
    for (int b = s.layers - 1; b > 0; --b) {  // backward: block b-1's, during block b's
      const long begin = indexOf(t, Kind::kBeforeBackward, b);
      const long end = indexOf(t, Kind::kAfterBackward, b);
      CHECK(gatherIssuedIn(t, weight(b - 1), begin, end));
    }
    // Gradient buckets go out in the backward hooks and are waited for in step() or when their
    // buffer is needed again; every bucket is waited for once, in issue order.
    std::vector<int64_t> issued, waited;
    for (const auto& e : t) {
      if (e.kind == Kind::kBucketIssued) issued.push_back(e.id);
      if (e.kind == Kind::kBucketWaited) waited.push_back(e.id);
    }
    CHECK(!issued.empty());
    CHECK(waited == issued);
  }
  // stage3_prefetch_bucket_size 0: nothing goes out ahead; every gather after its own block began.
  s.prefetch = 0;
  const Curve none = train(true, 2, s);
  for (const auto& t : none.trace)
    for (int b = 1; b < s.layers; ++b) {
      const long issue = indexOf(t, Kind::kGatherIssued, weight(b));
      CHECK(issue > indexOf(t, Kind::kBeforeForward, b));
    }
  // The host engine with the same knobs gives the same curve either way.
  const Curve host = train(false, 2, s);
  CHECK(test::maxRelDiff(none.losses, host.losses) < 1e-6);
}

TEST_CASE("device engine stage 3 checkpoints load into the host engine's stage 3 and back",
          "[multirank]") {
  for (bool bf16 : {false, true}) {
    INFO("bf16 " << bf16);
    Setup s;
    s.bf16 = bf16;
    s.steps = 6;
    const Curve full = train(true, 2, s);  // the trajectory to continue
    FullState atDev, atHost;
    Setup first = s;
    first.steps = 3;
    first.save = &atDev;
    train(true, 2, first);
    Setup rest = s;
    rest.startStep = 3;
    rest.load = &atDev;
    rest.save = &atHost;
    const Curve onHost = train(false, 2, rest);  // device checkpoint -> host engine
    const Curve onDev = train(true, 2, rest);    // and -> the device engine itself
    const double tol = bf16 ? 1e-5 : 1e-6;
    const std::vector<double> tail(full.losses.begin() + 3, full.losses.end());
    CHECK(test::maxRelDiff(onHost.losses, tail) < tol);
    CHECK(test::maxRelDiff(onDev.losses, tail) < tol);
    // The host engine's checkpoint after step 6 loads back into the device engine.
    FullState hostCkpt;
    Setup hostFirst = s;
    hostFirst.steps = 3;
    hostFirst.save = &hostCkpt;
    train(false, 2, hostFirst);
    Setup back = rest;
    back.load = &hostCkpt;
    back.save = nullptr;
    const Curve fromHost = train(true, 2, back);
    CHECK(test::maxRelDiff(fromHost.losses, tail) < tol);
  }
}

TEST_CASE("device engine stage 3 keeps less on the device than stage 2, and says what",
          "[multirank]") {
  Setup s;
  s.layers = 12;
  s.width = 32;
  s.steps = 1;
  s.bucket = 2000;
  const Curve s3 = train(true, 2, s, 3);
  const Curve s2 = train(true, 2, s, 2);
  const auto& m3 = s3.mem[0];
  const auto& m2 = s2.mem[0];
  const auto dev = zero::MemPlace::kDevice;
  CHECK(deviceTotal(m3) < deviceTotal(m2));
  // The partition: half of every parameter (chunks), fp32 params, grads and two Adam states.
  test::ToyModel m(s.layers, s.width);
  size_t local = 0;
  for (const auto& p : m.params) local += (p.numel + 1) / 2;
  CHECK(m3.at(zero::MemKind::kParams, dev) == 4 * local);
  CHECK(m3.at(zero::MemKind::kGrads, dev) == 4 * local);
  CHECK(m3.at(zero::MemKind::kOptimizerStates, dev) == 8 * local);
  // Buffers: the two gather slots (one block: E, W, c), the gradient slot (W, c), E's own
  // gradient and two buckets (input and half-size output of the largest: a block's W and c; E's
  // bucket is its own, reduce-scattered from E's gradient buffer).
  const size_t slot = 32 + 1024 + 32, grads = 1024 + 32, tied = 32, bucket = 1024 + 32;
  CHECK(m3.at(zero::MemKind::kBuffers, dev) ==
        4 * (2 * slot + grads + tied + 2 * (bucket + bucket / 2)));
  CHECK(m3.at(zero::MemKind::kParams, zero::MemPlace::kHost) == 0);
  // No prefetch allowed (stage3_prefetch_bucket_size 0): one gather slot.
  s.prefetch = 0;
  const Curve one = train(true, 2, s, 3);
  CHECK(one.mem[0].at(zero::MemKind::kBuffers, dev) ==
        m3.at(zero::MemKind::kBuffers, dev) - 4 * slot);
}
