// DeviceMirror (runtime/engine/device_mirror.h): the host ZeroEngine owning parameters while the
// op model computes on an Ops device. Over the CPU ops the whole path is host memory, so the run
// must equal the host model on the same engine: every stage (3 included, where the engine
// gathers and frees per block) and offload, fp32, with a tied weight (GPT-2's wte in the first
// and last block). The same calls run on a GPU in scripts/gpu_check.sh.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "runtime/engine/device_mirror.h"
#include "runtime/engine/timed_hooks.h"
#include "runtime/model/model.h"
#include "runtime/model/ops_model.h"
#include "runtime/tensor/ops.h"
#include "zero/zero_engine.h"

using namespace ds;

namespace {

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

struct Run {
  std::vector<float> losses;
  std::vector<float> params;
  size_t uploaded = 0;
  size_t deviceParamBytes = 0, deviceGradBytes = 0;
};

// Trains `steps` steps; mirrored: OpsGpt2 over CPU ops behind a DeviceMirror, else Gpt2Model.
Run train(bool mirrored, const zero::ZeroOptions& z, int steps = 4, bool windowed = false,
          bool checkpointing = false) {
  auto cfg = tinyGpt();
  cfg.activationCheckpointing = checkpointing;
  auto ops = runtime::makeCpuOps();
  auto model = mirrored ? runtime::makeModel(cfg, *ops) : runtime::makeModel(cfg);
  zero::OptimizerOptions o;
  o.lr = 1e-2f;
  o.weightDecay = 0.01f;
  zero::ZeroEngine eng(model->params(), model->numBlocks(), nullptr, z, o);
  std::vector<float> init(model->numParamsTotal());
  model->initParams(init.data(), 5);
  eng.setParams(init.data());
  runtime::TimedHooks hooks(eng);
  std::unique_ptr<runtime::DeviceMirror> mirror;
  if (mirrored)
    mirror = std::make_unique<runtime::DeviceMirror>(
        *ops, model->params(), cfg.compute, hooks,
        [&eng]() -> zero::ParamTable& { return eng.table(); }, windowed);
  const int B = 3, T = 10;
  Run run;
  for (int s = 0; s < steps; ++s) {
    std::vector<int32_t> in(B * T), tgt(B * T);
    for (int i = 0; i < B * T; ++i) {
      in[size_t(i)] = (i * 7 + s * 3) % cfg.vocabSize;
      tgt[size_t(i)] = i % 11 == 5 ? -1 : (i * 5 + s) % cfg.vocabSize;
    }
    eng.beginStep(true);
    zero::ParamTable& table = mirror ? mirror->table() : eng.table();
    zero::BlockHooks& h = mirror ? static_cast<zero::BlockHooks&>(*mirror) : hooks;
    run.losses.push_back(model->forward(in.data(), tgt.data(), B, T, table, h));
    model->backward(1.f, table, h);
    auto r = eng.step(1e-2f, 1.f, 1.f);
    REQUIRE_FALSE(r.skipped);
    if (mirror) mirror->invalidate();
  }
  run.params.resize(eng.numel());
  eng.getParams(run.params.data());
  if (mirror) {
    run.uploaded = mirror->bytesUploaded();
    run.deviceParamBytes = mirror->valueBytes();
    run.deviceGradBytes = mirror->gradBytes();
  }
  return run;
}

}  // namespace

TEST_CASE("device mirror over cpu ops equals the host model on the host engine", "[unit]") {
  for (int stage : {0, 1, 2, 3}) {
    for (const char* offload : {"none", "cpu"}) {
      if (stage == 0 && std::string(offload) == "cpu") continue;  // offload needs stage >= 1
      INFO("stage " << stage << " offload_optimizer " << offload);
      zero::ZeroOptions z;
      z.stage = stage;
      z.offloadOptimizer.device = offload;
      z.reduceBucketSize = 200;
      z.prefetchBucketSize = 300;
      z.paramPersistenceThreshold = 20;
      Run host = train(false, z);
      Run dev = train(true, z);
      REQUIRE(dev.losses.size() == host.losses.size());
      for (size_t s = 0; s < host.losses.size(); ++s)
        CHECK(std::abs(dev.losses[s] - host.losses[s]) <= 1e-6f * std::abs(host.losses[s]));
      double num = 0, den = 0;
      for (size_t i = 0; i < host.params.size(); ++i) {
        num += std::pow(double(dev.params[i]) - host.params[i], 2);
        den += std::pow(double(host.params[i]), 2);
      }
      CHECK(std::sqrt(num / den) < 1e-6);
      // Each step uploads every parameter once (fp32), not once per block that reads it.
      CHECK(dev.uploaded == 4 * host.params.size() * sizeof(float));
    }
  }
}

TEST_CASE("windowed device mirror (stage 3): one block on the device, same training", "[unit]") {
  zero::ZeroOptions z;
  z.stage = 3;
  z.prefetchBucketSize = 300;
  z.paramPersistenceThreshold = 20;
  for (bool ckpt : {false, true}) {
    for (const char* offload : {"none", "cpu"}) {
      INFO("offload_param " << offload << " activation checkpointing " << ckpt);
      z.offloadParam.device = offload;
      z.offloadOptimizer.device = offload;
      Run host = train(false, z, 4, false, ckpt);
      Run resident = train(true, z, 4, false, ckpt);
      Run windowed = train(true, z, 4, true, ckpt);
      REQUIRE(windowed.losses.size() == host.losses.size());
      for (size_t s = 0; s < host.losses.size(); ++s)
        CHECK(std::abs(windowed.losses[s] - host.losses[s]) <= 1e-6f * std::abs(host.losses[s]));
      CHECK(windowed.params == resident.params);
      // The device holds the largest block's parameters, not the whole model's.
      const auto model = runtime::makeModel(tinyGpt());
      std::vector<size_t> perBlock(size_t(model->numBlocks()), 0);
      for (const auto& p : model->params())
        for (int b : p.blocks) perBlock[size_t(b)] += p.numel;
      const size_t largest = *std::max_element(perBlock.begin(), perBlock.end());
      CHECK(windowed.deviceParamBytes == largest * sizeof(float));
      CHECK(windowed.deviceGradBytes == largest * sizeof(float));
      CHECK(windowed.deviceParamBytes < resident.deviceParamBytes / 2);
      // Every block uploads its parameters in forward and again in backward, every step.
      CHECK(windowed.uploaded > resident.uploaded);
    }
  }
}
