// Plan keys for training semantics: train.weight_decay_on, train.eval_tokens, and the one rule
// for relative paths (against the plan file's folder; the built-in plan against the current
// folder), each with its error text.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "runtime/config/plan_loader.h"
#include "tests/support/spawn_ranks.h"

using namespace ds::runtime;
using Catch::Matchers::Contains;

namespace {
const char* kMini = R"(model:
  gpt: {n_layer: 1, n_head: 2, n_embd: 16, seq_len: 8, vocab_size: 32}
deepspeed:
  train_batch_size: 8
)";

std::string errorOf(const std::string& yaml, std::vector<std::string> sets = {}) {
  try {
    parsePlan(yaml, "plan.yaml", sets, 1);
  } catch (const ds::ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}
}  // namespace

TEST_CASE("plan: train.weight_decay_on is matrices by default, or all", "[unit]") {
  CHECK(parsePlan(kMini, "plan.yaml").train.weightDecayOn == "matrices");
  CHECK(parsePlan(kMini, "plan.yaml", {"train.weight_decay_on=all"}).train.weightDecayOn == "all");
  CHECK(errorOf(kMini, {"train.weight_decay_on=biases"}) ==
        "--set train.weight_decay_on: expected 'matrices' (parameters of 2 or more dimensions: no "
        "decay for biases and LayerNorm) or 'all', got 'biases'");
  CHECK(errorOf(std::string(kMini) + "train: {weight_decay_on: 3}\n") ==
        "plan.yaml:5:26: train.weight_decay_on: expected 'matrices' (parameters of 2 or more "
        "dimensions: no decay for biases and LayerNorm) or 'all', got '3'");
}

TEST_CASE("plan: train.eval_tokens, or eval_steps, not both", "[unit]") {
  Plan p = parsePlan(kMini, "plan.yaml", {"train.eval_tokens=4096"});
  CHECK(p.train.evalTokens == 4096);
  CHECK(parsePlan(kMini, "plan.yaml").train.evalTokens == 0);
  CHECK_THAT(errorOf(kMini, {"train.eval_tokens=4096", "train.eval_steps=3"}),
             Contains("train.eval_tokens: give either train.eval_tokens or train.eval_steps, not "
                      "both"));
  CHECK_THAT(errorOf(kMini, {"train.eval_tokens=-1"}), Contains("train.eval_tokens"));
}

TEST_CASE("plan: every relative path resolves against the plan file's folder", "[unit]") {
  ds::test::TempDir dir;
  const std::string folder = dir.file("plans");
  std::filesystem::create_directories(folder);
  {
    std::ofstream f(folder + "/p.yaml");
    f << R"(model:
  gpt: {n_layer: 1, n_head: 2, n_embd: 16, seq_len: 8, vocab_size: 32, init_from: w/gpt2.bin}
data: {shards: "../tok/train_*.bin", val: "tok/val_*.bin"}
train: {checkpoint: {dir: ck}}
deepspeed:
  train_batch_size: 8
  zero_optimization:
    stage: 3
    offload_optimizer: {device: nvme, nvme_path: swap}
    offload_param: {device: nvme, nvme_path: /abs/swap}
  tensorboard: {enabled: true, output_path: runs}
  csv_monitor: {enabled: true, output_path: ./csv/}
)";
  }
  Plan p = loadPlan({folder + "/p.yaml", {"train.checkpoint.dir=ck2"}, 1});
  CHECK(p.initFrom == folder + "/w/gpt2.bin");
  CHECK(p.data.shards == dir.file("tok/train_*.bin"));
  CHECK(p.data.val == folder + "/tok/val_*.bin");
  CHECK(p.train.checkpointDir == folder + "/ck2");  // a --set value is part of the plan
  CHECK(p.deepspeed.zero.offloadOptimizer.nvmePath == folder + "/swap");
  CHECK(p.deepspeed.zero.offloadParam.nvmePath == "/abs/swap");
  CHECK(p.deepspeed.tensorboard.outputPath == folder + "/runs");
  CHECK(p.deepspeed.csvMonitor.outputPath == folder + "/csv/");

  // The built-in plan: the current folder (paths stay relative, as given).
  Plan b = loadPlan({"", {"train.checkpoint.dir=ck", "model.gpt.init_from=./w.bin"}, 1});
  CHECK(b.train.checkpointDir == "ck");
  CHECK(b.initFrom == "w.bin");
  CHECK(b.data.shards.empty());
}
