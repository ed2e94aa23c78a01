// DeviceMirror (runtime/engine/device_mirror.h): the host ZeroEngine owning parameters while the
// op model computes on an Ops device, the copies pipelined. Over the CPU ops the whole path is
// host memory, so the run must equal the host model on the same engine: every stage (3 included,
// where the engine gathers and frees per block) and offload, fp32, with a tied weight (GPT-2's
// wte in the first and last block). A fake copy stream (DeferredCopyOps) runs every async copy as
// late as its events allow, so a missing wait shows up as a wrong loss. Spies on both sides check
// the pipelined order: each block's gradient reaches the engine exactly once, in order, one block
// late and before backward returns; double-buffered windows hold the right block. The same calls
// run on a GPU in scripts/gpu_check.sh.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/engine/device_mirror.h"
#include "runtime/engine/timed_hooks.h"
#include "runtime/model/model.h"
#include "runtime/model/ops_model.h"
#include "runtime/tensor/cpu/cpu_ops.h"
#include "runtime/tensor/ops.h"
#include "zero/zero_engine.h"

using namespace ds;
using runtime::OpsEvent;
using runtime::OpsStream;

namespace {

// CPU ops with a lazy copy stream: async copies queue up and run (in order) only when an event
// after them is waited on by the host or by compute; compute runs at once, so its events are
// complete when recorded. A copy thus reads its source and lands as late as a GPU may let it.
class DeferredCopyOps final : public runtime::CpuOps {
 public:
  void uploadAsync(void* dst, const void* src, size_t bytes) override { push({dst, src, bytes}); }
  bool registerHost(void*, size_t) override { return registerable; }
  bool registerable = false;  // registerHost succeeds: the mirror uploads from host memory as is
  void downloadAsync(void* dst, const void* src, size_t bytes) override { push({dst, src, bytes}); }
  std::unique_ptr<OpsEvent> newEvent() override { return std::make_unique<Event>(); }
  void record(OpsEvent& e, OpsStream s) override {
    static_cast<Event&>(e).upTo = s == OpsStream::kCopy ? queue_.size() : 0;
  }
  void streamWait(OpsStream s, const OpsEvent& e) override {
    if (s == OpsStream::kCompute) runTo(static_cast<const Event&>(e).upTo);
  }
  bool done(const OpsEvent& e) override { return ran_ >= static_cast<const Event&>(e).upTo; }
  void hostWait(const OpsEvent& e, std::chrono::milliseconds, const std::string&) override {
    runTo(static_cast<const Event&>(e).upTo);
  }
  size_t lateCopies() const { return late_; }  // copies queued behind one not yet run

 private:
  struct Event : OpsEvent {
    size_t upTo = 0;
  };
  struct Copy {
    void* dst;
    const void* src;
    size_t bytes;
  };
  void push(const Copy& c) {
    late_ += ran_ < queue_.size();
    queue_.push_back(c);
  }
  void runTo(size_t n) {
    for (; ran_ < n; ++ran_) std::memcpy(queue_[ran_].dst, queue_[ran_].src, queue_[ran_].bytes);
  }
  std::vector<Copy> queue_;
  size_t ran_ = 0, late_ = 0;
};

// Logs every hook as "<tag><+|-><F|B><block>" and forwards it; after forwarding a before* it
// calls check(block, backward).
class Spy : public zero::BlockHooks {
 public:
  Spy(zero::BlockHooks& next, std::string tag, std::vector<std::string>& log)
      : next_(next), tag_(std::move(tag)), log_(log) {}
  std::function<void(int, bool)> check;
  void beforeForward(int b) override {
    note("+F", b);
    next_.beforeForward(b);
    if (check) check(b, false);
  }
  void afterForward(int b) override {
    note("-F", b);
    next_.afterForward(b);
  }
  void beforeBackward(int b) override {
    note("+B", b);
    next_.beforeBackward(b);
    if (check) check(b, true);
  }
  void afterBackward(int b) override {
    note("-B", b);
    next_.afterBackward(b);
  }

 private:
  void note(const char* what, int b) { log_.push_back(tag_ + what + std::to_string(b)); }
  zero::BlockHooks& next_;
  std::string tag_;
  std::vector<std::string>& log_;
};

runtime::ModelConfig tinyGpt() {
  runtime::ModelConfig c;
  c.kind = "gpt2";
  c.nLayer = 2;
  c.nHead = 2;
  c.nEmbd = 16;
  c.seqLen = 12;
  c.vocabSize = 37;
  return c;
}

struct Setup {
  bool mirrored = true;
  zero::ZeroOptions z;
  int steps = 4;
  bool windowed = false;
  bool checkpointing = false;
  bool deferred = false;   // the lazy copy stream
  bool spies = false;      // fill Run::log and run the window checks
  size_t overlapTile = 0;  // > 0: the optimizer overlap (ZeroEngine::setParamsReady), this tile
  bool doubleInvalidate = false;  // a second invalidate() after each step (as a load does)
  bool registerable = false;      // deferred: registerHost succeeds (uploads read the engine's)
};

struct Run {
  std::vector<float> losses;
  std::vector<float> params;
  size_t uploaded = 0, downloaded = 0;
  size_t deviceParamBytes = 0, deviceGradBytes = 0, slotElems = 0;
  zero::MemoryReport memory;
  std::vector<std::vector<std::string>> log;  // per step: the spies' hooks of that step
  size_t windowChecks = 0, lateCopies = 0;
  std::vector<size_t> uploadedInStep;  // per step: bytes uploaded from inside eng.step()
  bool uploadsFromHost = false;        // the overlap read the engine's page-locked values
};

// Trains `steps` steps; mirrored: OpsGpt2 over CPU ops behind a DeviceMirror, else Gpt2Model.
Run train(const Setup& s) {
  auto cfg = tinyGpt();
  cfg.activationCheckpointing = s.checkpointing;
  std::unique_ptr<runtime::Ops> ops;
  DeferredCopyOps* deferred = nullptr;
  if (s.deferred) {
    auto d = std::make_unique<DeferredCopyOps>();
    d->registerable = s.registerable;
    deferred = d.get();
    ops = std::move(d);
  } else {
    ops = runtime::makeCpuOps();
  }
  auto model = s.mirrored ? runtime::makeModel(cfg, *ops) : runtime::makeModel(cfg);
  zero::OptimizerOptions o;
  o.lr = 1e-2f;
  o.weightDecay = 0.01f;
  zero::ZeroEngine eng(model->params(), model->numBlocks(), nullptr, s.z, o);
  std::vector<float> init(model->numParamsTotal());
  model->initParams(init.data(), 5);
  eng.setParams(init.data());
  runtime::TimedHooks hooks(eng);
  std::vector<std::string> log;
  Spy inner(hooks, "E", log);  // what the engine sees
  std::unique_ptr<runtime::DeviceMirror> mirror;
  if (s.mirrored) {
    runtime::DeviceMirrorOptions mo;
    mo.windowed = s.windowed;
    mirror = std::make_unique<runtime::DeviceMirror>(
        *ops, model->params(), cfg.compute, s.spies ? static_cast<zero::BlockHooks&>(inner) : hooks,
        [&eng]() -> zero::ParamTable& { return eng.table(); }, mo);
    if (s.overlapTile)
      eng.setParamsReady([m = mirror.get()](size_t off, size_t n) { m->paramsReady(off, n); },
                         s.overlapTile);
  }
  Run run;
  std::unique_ptr<Spy> outer;  // what the model calls
  const void* lastSlot = nullptr;
  if (mirror && s.spies) {
    outer = std::make_unique<Spy>(*mirror, "M", log);
    outer->check = [&](int b, bool backward) {
      const zero::ParamTable& dev = mirror->table();
      const zero::ParamTable& host = eng.table();
      const auto& params = model->params();
      const void* first = nullptr;
      for (size_t i = 0; i < params.size(); ++i) {
        const auto& bl = params[i].blocks;
        if (std::find(bl.begin(), bl.end(), b) == bl.end()) continue;
        REQUIRE(dev.value[i] != nullptr);
        REQUIRE(host.value[i] != nullptr);
        // The device copy holds this block's current values (the upload has landed: the mirror
        // made compute wait for it, which ran the lazy copies).
        CHECK(std::memcmp(dev.value[i], host.value[i], params[i].numel * sizeof(float)) == 0);
        if (backward) {
          REQUIRE(dev.grad[i] != nullptr);
          for (size_t k = 0; k < params[i].numel; ++k) REQUIRE(dev.grad[i][k] == 0.f);
        }
        if (first == nullptr) first = dev.value[i];
      }
      if (s.windowed && lastSlot != nullptr && first != lastSlot) {
        // Double buffer: consecutive blocks sit one slot apart.
        const auto gap =
            std::abs(static_cast<const char*>(first) - static_cast<const char*>(lastSlot));
        CHECK(size_t(gap) == mirror->largestBlockElems() * sizeof(float));
      }
      lastSlot = first;
      ++run.windowChecks;
    };
  }
  const int B = 3, T = 10;
  for (int step = 0; step < s.steps; ++step) {
    std::vector<int32_t> in(B * T), tgt(B * T);
    for (int i = 0; i < B * T; ++i) {
      in[size_t(i)] = (i * 7 + step * 3) % cfg.vocabSize;
      tgt[size_t(i)] = i % 11 == 5 ? -1 : (i * 5 + step) % cfg.vocabSize;
    }
    eng.beginStep(true);
    zero::ParamTable& table = mirror ? mirror->table() : eng.table();
    zero::BlockHooks& h = outer    ? static_cast<zero::BlockHooks&>(*outer)
                          : mirror ? static_cast<zero::BlockHooks&>(*mirror)
                                   : hooks;
    run.losses.push_back(model->forward(in.data(), tgt.data(), B, T, table, h));
    model->backward(1.f, table, h);
    run.log.push_back(log);
    log.clear();
    const size_t before = mirror ? mirror->bytesUploaded() : 0;
    auto r = eng.step(1e-2f, 1.f, 1.f);
    REQUIRE_FALSE(r.skipped);
    if (mirror) run.uploadedInStep.push_back(mirror->bytesUploaded() - before);
    if (mirror) mirror->invalidate();
    if (mirror && s.doubleInvalidate) mirror->invalidate();
  }
  run.params.resize(eng.numel());
  eng.getParams(run.params.data());
  if (mirror) {
    run.uploaded = mirror->bytesUploaded();
    run.uploadsFromHost = mirror->uploadsFromHost();
    run.downloaded = mirror->bytesDownloaded();
    run.deviceParamBytes = mirror->valueBytes();
    run.deviceGradBytes = mirror->gradBytes();
    run.slotElems = mirror->largestBlockElems();
    run.memory = mirror->memory(eng.memory());
  }
  if (deferred) run.lateCopies = deferred->lateCopies();
  return run;
}

void checkSameTraining(const Run& dev, const Run& host) {
  REQUIRE(dev.losses.size() == host.losses.size());
  for (size_t s = 0; s < host.losses.size(); ++s)
    CHECK(std::abs(dev.losses[s] - host.losses[s]) <= 1e-6f * std::abs(host.losses[s]));
  double num = 0, den = 0;
  for (size_t i = 0; i < host.params.size(); ++i) {
    num += std::pow(double(dev.params[i]) - host.params[i], 2);
    den += std::pow(double(host.params[i]), 2);
  }
  CHECK(std::sqrt(num / den) < 1e-6);
}

size_t largestBlock() {
  const auto model = runtime::makeModel(tinyGpt());
  std::vector<size_t> perBlock(size_t(model->numBlocks()), 0);
  for (const auto& p : model->params())
    for (int b : p.blocks) perBlock[size_t(b)] += p.numel;
  return *std::max_element(perBlock.begin(), perBlock.end());
}

ptrdiff_t at(const std::vector<std::string>& log, const std::string& what) {
  auto it = std::find(log.begin(), log.end(), what);
  return it == log.end() ? -1 : it - log.begin();
}

}  // namespace

TEST_CASE("device mirror over cpu ops equals the host model on the host engine", "[unit]") {
  for (bool deferred : {false, true}) {
    for (int stage : {0, 1, 2, 3}) {
      for (const char* offload : {"none", "cpu"}) {
        if (stage == 0 && std::string(offload) == "cpu") continue;  // offload needs stage >= 1
        INFO("stage " << stage << " offload_optimizer " << offload << " lazy copies " << deferred);
        Setup s;
        s.z.stage = stage;
        s.z.offloadOptimizer.device = offload;
        s.z.reduceBucketSize = 200;
        s.z.prefetchBucketSize = 300;
        s.z.paramPersistenceThreshold = 20;
        s.deferred = deferred;
        Setup h = s;
        h.mirrored = false;
        Run host = train(h);
        Run dev = train(s);
        checkSameTraining(dev, host);
        // Each step uploads every parameter once (fp32), not once per block that reads it, and
        // downloads each block's gradients once (the tied wte twice: head and encoder).
        CHECK(dev.uploaded == 4 * host.params.size() * sizeof(float));
        CHECK(dev.downloaded > 4 * host.params.size() * sizeof(float));
        if (deferred) CHECK(dev.lateCopies > 0);  // copies really ran late
      }
    }
  }
}

TEST_CASE("windowed device mirror (stage 3): two blocks on the device, same training", "[unit]") {
  Setup s;
  s.z.stage = 3;
  s.z.prefetchBucketSize = 300;
  s.z.paramPersistenceThreshold = 20;
  for (bool deferred : {false, true}) {
    for (bool ckpt : {false, true}) {
      for (const char* offload : {"none", "cpu"}) {
        INFO("offload_param " << offload << " activation checkpointing " << ckpt << " lazy copies "
                              << deferred);
        s.z.offloadParam.device = offload;
        s.z.offloadOptimizer.device = offload;
        s.checkpointing = ckpt;
        s.deferred = deferred;
        Setup h = s;
        h.mirrored = false;
        Setup w = s;
        w.windowed = true;
        Run host = train(h);
        Run resident = train(s);
        Run windowed = train(w);
        checkSameTraining(windowed, host);
        CHECK(windowed.params == resident.params);
        // The device holds two blocks' parameters (double buffer), not the whole model's.
        const size_t largest = largestBlock();
        CHECK(windowed.deviceParamBytes == 2 * largest * sizeof(float));
        CHECK(windowed.deviceGradBytes == 2 * largest * sizeof(float));
        CHECK(resident.deviceGradBytes == 2 * largest * sizeof(float));
        CHECK(windowed.deviceParamBytes < resident.deviceParamBytes);
        // Blocks upload in forward and again in backward (except the two the turn keeps).
        CHECK(windowed.uploaded > resident.uploaded);
      }
    }
  }
}

TEST_CASE("device mirror pipeline: each block's gradient reaches the engine once, one late",
          "[unit]") {
  for (bool windowed : {false, true}) {
    INFO("windowed " << windowed);
    Setup s;
    s.z.stage = windowed ? 3 : 2;
    s.z.offloadOptimizer.device = "cpu";
    s.z.offloadParam.device = windowed ? "cpu" : "none";
    s.z.reduceBucketSize = 200;
    s.z.prefetchBucketSize = 300;
    s.z.paramPersistenceThreshold = 20;
    s.windowed = windowed;
    s.deferred = true;
    s.spies = true;
    s.steps = 2;
    Run run = train(s);
    const int N = tinyGpt().nLayer + 2;
    CHECK(run.windowChecks == size_t(2 * N * s.steps));
    for (const auto& log : run.log) {
      // Exactly once each, in the model's order, all before backward returned (the log ends
      // when model->backward returns, before step()).
      std::vector<std::string> engineAfters;
      for (const auto& e : log)
        if (e.rfind("E-B", 0) == 0) engineAfters.push_back(e);
      REQUIRE(engineAfters.size() == size_t(N));
      for (int k = 0; k < N; ++k)
        CHECK(engineAfters[size_t(k)] == "E-B" + std::to_string(N - 1 - k));
      for (int b = 0; b < N; ++b) {
        const std::string n = std::to_string(b);
        // The engine enters a block before the model runs it, and exactly once per pass.
        CHECK(std::count(log.begin(), log.end(), "E+F" + n) == 1);
        CHECK(std::count(log.begin(), log.end(), "E+B" + n) == 1);
        CHECK(at(log, "E+F" + n) <= at(log, "M+F" + n) + 1);
        CHECK(at(log, "E+B" + n) <= at(log, "M+B" + n) + 1);
        if (b + 1 < N) {  // prefetch: block b+1 entered while b computes
          CHECK(at(log, "E+F" + std::to_string(b + 1)) < at(log, "M-F" + n));
        }
        if (b > 0) {  // lag one: block b is consumed after the model finished b-1's kernels
          const std::string prev = std::to_string(b - 1);
          CHECK(at(log, "E+B" + prev) < at(log, "M-B" + n));
          CHECK(at(log, "M-B" + prev) < at(log, "E-B" + n));
          if (b > 1) CHECK(at(log, "E-B" + n) < at(log, "M+B" + std::to_string(b - 2)));
        }
      }
      CHECK(at(log, "M-B0") < at(log, "E-B0"));  // drained in block 0's hook
      CHECK(log.back() == "E-B0");
    }
  }
}

TEST_CASE("device mirror memory: the device holds what the ZeRO-Offload formulas say", "[unit]") {
  const auto model = runtime::makeModel(tinyGpt());
  const size_t psi = model->numParamsTotal(), largest = largestBlock();
  Setup s;
  s.steps = 1;
  s.z.offloadOptimizer.device = "cpu";
  SECTION("stage 2 + offload_optimizer cpu: parameters and two blocks' gradients") {
    s.z.stage = 2;
    const Run run = train(s);
    const zero::MemoryReport& m = run.memory;
    using K = zero::MemKind;
    using P = zero::MemPlace;
    CHECK(m.at(K::kOptimizerStates, P::kDevice) == 0);
    // m and v; at fp32 the master aliases the engine's fp32 params (counted under params)
    CHECK(m.at(K::kOptimizerStates, P::kHost) >= 2 * psi * sizeof(float));
    CHECK(m.at(K::kParams, P::kDevice) == psi * sizeof(float));
    CHECK(m.at(K::kGrads, P::kDevice) == 2 * largest * sizeof(float));
    CHECK(m.at(K::kGrads, P::kDevice) < psi * sizeof(float));
    CHECK(m.at(K::kBuffers, P::kDevice) == 0);
    CHECK(m.at(K::kParams, P::kHost) >= psi * sizeof(float));  // the engine's copy
  }
  SECTION("stage 3 + offload optimizer and param cpu: two blocks' parameters and gradients") {
    s.z.stage = 3;
    s.z.offloadParam.device = "cpu";
    s.windowed = true;
    const Run run = train(s);
    const zero::MemoryReport& m = run.memory;
    using K = zero::MemKind;
    using P = zero::MemPlace;
    CHECK(m.at(K::kOptimizerStates, P::kDevice) == 0);
    CHECK(m.at(K::kParams, P::kDevice) == 2 * largest * sizeof(float));
    CHECK(m.at(K::kGrads, P::kDevice) == 2 * largest * sizeof(float));
    CHECK(m.at(K::kParams, P::kDevice) < psi * sizeof(float));
    CHECK(m.at(K::kBuffers, P::kDevice) == 0);
  }
}

TEST_CASE("device mirror optimizer overlap: tiles upload inside the step, the same bits",
          "[unit]") {
  const size_t psiBytes = runtime::makeModel(tinyGpt())->numParamsTotal() * sizeof(float);
  for (int copies : {0, 1, 2}) {  // synchronous; lazy from staging; lazy from the engine's memory
    const bool deferred = copies > 0;
    for (int stage : {0, 1, 2}) {
      for (const char* offload : {"none", "cpu"}) {
        if (stage == 0 && std::string(offload) == "cpu") continue;
        Setup off;
        off.z.stage = stage;
        off.z.offloadOptimizer.device = offload;
        off.z.reduceBucketSize = 200;
        off.deferred = deferred;
        const Run base = train(off);
        for (size_t tile : {size_t(1), size_t(37), size_t(1000), size_t(1) << 30}) {
          INFO("stage " << stage << " offload_optimizer " << offload << " copies " << copies
                        << " tile " << tile);
          Setup on = off;
          on.overlapTile = tile;
          on.registerable = copies == 2;
          const Run run = train(on);
          CHECK(run.losses == base.losses);
          CHECK(run.params == base.params);
          // Every parameter once per step, from inside the step (the last step's too, which no
          // forward reads here); the first forward uploads as before.
          for (size_t k = 0; k < run.uploadedInStep.size(); ++k) {
            CHECK(run.uploadedInStep[k] == psiBytes);
            CHECK(base.uploadedInStep[k] == 0);
          }
          CHECK(run.uploaded == base.uploaded + psiBytes);
          CHECK(run.uploadsFromHost == (copies == 2));
        }
        // A second invalidate (a load after the step) drops the overlap's uploads: the forward
        // uploads every region again and trains the same.
        Setup twice = off;
        twice.overlapTile = 37;
        twice.registerable = copies == 2;
        twice.doubleInvalidate = true;
        const Run again = train(twice);
        CHECK(again.losses == base.losses);
        CHECK(again.params == base.params);
        CHECK(again.uploaded == 2 * base.uploaded);
      }
    }
  }
}

TEST_CASE("device mirror refuses params that declare backward parts", "[unit]") {
  // The host GPT-2 declares parts (MLP half, attention half); the mirror calls no part hook and
  // reads the previous block's values early, so it must refuse them up front, naming a param.
  const auto model = runtime::makeModel(tinyGpt());
  REQUIRE(std::any_of(model->params().begin(), model->params().end(),
                      [](const zero::ParamInfo& p) { return p.backwardPart != 0; }));
  zero::ZeroOptions z;
  z.stage = 3;
  zero::ZeroEngine eng(model->params(), model->numBlocks(), nullptr, z, zero::OptimizerOptions{});
  runtime::TimedHooks hooks(eng);
  auto ops = runtime::makeCpuOps();
  runtime::DeviceMirrorOptions mo;
  mo.windowed = true;
  auto make = [&](const std::vector<zero::ParamInfo>& params) {
    return runtime::DeviceMirror(
        *ops, params, DType::kF32, hooks, [&eng]() -> zero::ParamTable& { return eng.table(); },
        mo);
  };
  CHECK_THROWS_WITH(make(model->params()), Catch::Contains("backward part") &&
                                               Catch::Contains("h.0.") &&
                                               Catch::Contains("dropBackwardParts"));
  std::vector<zero::ParamInfo> flat = model->params();
  for (zero::ParamInfo& p : flat) p.backwardPart = 0;
  CHECK_NOTHROW(make(flat));
}
