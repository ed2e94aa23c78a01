// The plan loader end to end on real files: defaults, DeepSpeed defaults, --set, deepspeed_config
// JSON files, the examples, and the error texts (key path, file:line:col) for bad plans.
#include <catch2/catch.hpp>

#include <filesystem>

#include "core/error.h"
#include "ds/config.h"
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

std::string errorOf(const std::string& yaml, std::vector<std::string> sets = {}, int world = 1) {
  try {
    parsePlan(yaml, "plan.yaml", sets, world);
  } catch (const ds::ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}
}  // namespace

TEST_CASE("plan: built-in default plan resolves for 1, 2 and 4 ranks", "[unit]") {
  for (int w : {1, 2, 4}) {
    Plan p = loadPlan({"", {}, w});
    CHECK(p.model.kind == "gpt2");
    CHECK(p.data.kind == "synthetic");
    CHECK(p.deepspeed.trainBatchSize == 32);
    CHECK(p.deepspeed.microBatchPerGpu * w == 32);
    CHECK(p.deepspeed.gradientAccumulationSteps == 1);
    CHECK(p.source == "<built-in default plan>");
  }
  Plan p = loadPlan({});
  CHECK(p.deepspeed.scheduler.totalNumSteps == p.train.steps);  // defaults to train.steps
  CHECK(p.logEvery() == 25);
}

TEST_CASE("plan: DeepSpeed documented defaults", "[unit]") {
  Plan p = parsePlan(kMini, "mini");
  const auto& d = p.deepspeed;
  CHECK(d.fp16.initialScalePower == 16);
  CHECK(d.fp16.lossScaleWindow == 1000);
  CHECK(d.fp16.hysteresis == 2);
  CHECK(d.fp16.minLossScale == 1.0);
  CHECK(d.zero.stage == 0);
  CHECK(d.zero.reduceBucketSize == 500000000);
  CHECK_FALSE(d.zero.overlapComm);
  CHECK(d.zero.contiguousGradients);
  CHECK(d.zero.paramPersistenceThreshold == 100000);
  CHECK(d.stepsPerPrint == 10);
  CHECK(d.gradientClipping == 0.0);
  CHECK(d.tensorboard.jobName == "DeepSpeedJobName");
  Plan s3 = parsePlan(kMini, "mini", {"deepspeed.zero_optimization.stage=3"});
  CHECK(s3.deepspeed.zero.overlapComm);  // null overlap_comm: true iff stage 3
  CHECK(s3.deepspeed.zero.stage == 3);
}

TEST_CASE("plan: --set overrides are typed by the schema", "[unit]") {
  Plan p = parsePlan(kMini, "mini",
                     {"train.steps=7", "deepspeed.bf16.enabled=true",
                      "deepspeed.optimizer.params.betas=[0.8, 0.9]",
                      "deepspeed.zero_optimization.reduce_bucket_size=5e6",
                      "deepspeed.activation_checkpointing.enabled=true"});
  CHECK(p.train.steps == 7);
  CHECK(p.deepspeed.bf16);
  CHECK(p.model.compute == ds::DType::kBF16);
  CHECK(p.deepspeed.zero.compute == ds::DType::kBF16);
  CHECK(p.model.activationCheckpointing);
  CHECK(p.deepspeed.optimizer.beta1 == Approx(0.8f));
  CHECK(p.deepspeed.zero.reduceBucketSize == 5000000);
  // (the list names every key of the block, DeepSpeed's accepted-without-effect ones included)
  CHECK_THAT(errorOf(kMini, {"deepspeed.zero_optimization.stagee=2"}),
             Contains("--set deepspeed.zero_optimization.stagee: unknown key (did you mean "
                      "'deepspeed.zero_optimization.stage'?); known keys here: "
                      "allgather_bucket_size, allgather_partitions, allgather_sequential, "));
  CHECK(errorOf(kMini, {"train.steps=many"}) ==
        "--set train.steps: expected an integer, got 'many'");
  CHECK(errorOf(kMini, {"train.steps"}) == "--set train.steps: expected key.path=value");
  CHECK(errorOf(kMini, {"model.gpt.n_layer.x=1"}) ==
        "--set model.gpt.n_layer.x=1: 'model.gpt.n_layer' is not a map, cannot set "
        "'model.gpt.n_layer.x' inside it");
}

TEST_CASE("plan: errors name the key path and file:line:col", "[unit]") {
  std::string y = std::string(kMini) + "  zero_optimization:\n    stage: 4\n";
  CHECK(errorOf(y) ==
        "plan.yaml:6:12: deepspeed.zero_optimization.stage: Maximum supported ZeRO stage is 3, got "
        "4");
  y = std::string(kMini) + "  fp16: {enabled: yes}\n";
  CHECK(errorOf(y) == "plan.yaml:5:19: deepspeed.fp16.enabled: expected true or false, got 'yes'");
  y = std::string(kMini) + "  fp16: {enabled: true}\n  bf16: {enabled: true}\n";
  CHECK_THAT(errorOf(y), Contains("deepspeed.bf16: bfloat16 and fp16 modes cannot be "
                                  "simultaneously enabled"));
  y = std::string(kMini) + "trian: {steps: 3}\n";
  CHECK_THAT(errorOf(y), Contains("plan.yaml:5:1: trian: unknown key (did you mean 'train'?)"));
  CHECK(errorOf("model:\n  gpt: {n_layer: 1, n_head: 3, n_embd: 16, seq_len: 8, vocab_size: 32}\n"
                "deepspeed: {train_batch_size: 8}\n") ==
        "plan.yaml:2:40: model.gpt.n_embd: must be divisible by n_head (3), got 16");
  CHECK(errorOf("model:\n  gpt: {n_layer: 0, n_head: 2, n_embd: 16, seq_len: 8, vocab_size: 32}\n"
                "deepspeed: {train_batch_size: 8}\n") ==
        "plan.yaml:2:18: model.gpt.n_layer: must be in [1, 1024], got 0");
  CHECK_THAT(errorOf(kMini, {}, 3),
             Contains("deepspeed: Check batch related parameters. train_batch_size is not equal "
                      "to micro_batch_per_gpu * gradient_acc_step * world_size 8 != 2 * 1 * 3 "
                      "(world size 3)"));
  CHECK_THAT(errorOf("deepspeed: {train_batch_size: 8}\n"),
             Contains("model: required (model.gpt or model.mlp)"));
  CHECK_THAT(errorOf("model: [1, 2\n"), Contains("plan.yaml:"));
  y = std::string(kMini) + "  optimizer: {type: Adamax}\n";
  CHECK_THAT(errorOf(y), Contains("deepspeed.optimizer.type: expected one of Adam, AdamW, SGD, "
                                  "Lamb, OneBitAdam, ZeroOneAdam, OneBitLamb, got 'Adamax'"));
  y = std::string(kMini) + "  zero_optimization: {stage: 2, offload_param: {device: cpu}}\n";
  CHECK_THAT(errorOf(y), Contains("offload_param is only supported with ZeRO stage 3"));
  y = std::string(kMini) + "  zero_optimization: {stage: 3, offload_optimizer: {device: nvme}}\n";
  CHECK_THAT(errorOf(y), Contains("offload_optimizer.nvme_path: required when device is nvme"));
}

TEST_CASE("plan: deepspeed_config JSON file, errors point into it", "[unit]") {
  ds::test::TempDir dir;
  ds::test::writeFile(dir.file("ds.json"), R"({
  "train_micro_batch_size_per_gpu": 2,
  "gradient_accumulation_steps": 2,
  "optimizer": {"type": "adam", "params": {"lr": 1e-4, "adam_w_mode": false}},
  "zero_optimization": {"stage": 2, "overlap_comm": true, "reduce_bucket_size": 5e8,
                        "offload_optimizer": {"device": "cpu", "pin_memory": true}}
})");
  ds::test::writeFile(dir.file("plan.yaml"),
                      "model:\n  mlp: {sizes: [16, 32, 16], seq_len: 4}\n"
                      "deepspeed_config: ds.json\n");
  Plan p = loadPlan({dir.file("plan.yaml"), {"deepspeed.gradient_accumulation_steps=4"}, 2});
  CHECK(p.deepspeed.trainBatchSize == 16);
  CHECK(p.deepspeed.optimizer.type == "Adam");
  CHECK_FALSE(p.deepspeed.optimizer.adamwMode);
  CHECK(p.deepspeed.optimizer.lr == Approx(1e-4f));
  CHECK(p.deepspeed.zero.stage == 2);
  CHECK(p.deepspeed.zero.offloadOptimizer.device == "cpu");
  CHECK(p.deepspeed.zero.offloadOptimizer.pinMemory);
  CHECK(p.model.kind == "mlp");
  CHECK(p.dsConfigJson.find("\"stage\": 2") != std::string::npos);

  ds::test::writeFile(dir.file("bad.json"), "{\n  \"train_batch_size\": 8,\n  \"fp17\": {}\n}\n");
  ds::test::writeFile(dir.file("plan2.yaml"),
                      "model:\n  mlp: {sizes: [16, 16]}\ndeepspeed_config: bad.json\n");
  try {
    loadPlan({dir.file("plan2.yaml"), {}, 1});
    FAIL("accepted fp17");
  } catch (const ds::ConfigError& e) {
    CHECK_THAT(e.what(), Contains(dir.file("bad.json") + ":3:3: deepspeed.fp17: unknown key"));
  }
  ds::test::writeFile(dir.file("plan3.yaml"),
                      "model:\n  mlp: {sizes: [16, 16]}\ndeepspeed_config: missing.json\n");
  CHECK_THROWS_WITH(loadPlan({dir.file("plan3.yaml"), {}, 1}), Contains("cannot read"));
  // The keys inline under deepspeed_config (a DeepSpeed user's guess): pointed at `deepspeed:`.
  ds::test::writeFile(
      dir.file("plan4.yaml"),
      "model:\n  mlp: {sizes: [16, 16]}\ndeepspeed_config: {train_batch_size: 8}\n");
  CHECK_THROWS_WITH(loadPlan({dir.file("plan4.yaml"), {}, 1}),
                    Contains("plan4.yaml:3:19: deepspeed_config: ") &&
                        Contains("write them under `deepspeed:` instead"));
  // --set may name the JSON file itself; deepspeed.* overrides then apply on top of it.
  Plan q = loadPlan({dir.file("plan3.yaml"),
                     {"deepspeed.train_micro_batch_size_per_gpu=1", "deepspeed_config=ds.json"},
                     2});
  CHECK(q.deepspeed.microBatchPerGpu == 1);
  CHECK(q.deepspeed.trainBatchSize == 4);
}

TEST_CASE("plan: every example plan parses", "[unit]") {
  int n = 0;
  for (const auto& e :
       std::filesystem::directory_iterator(std::string(DS_SOURCE_DIR) + "/examples")) {
    if (e.path().extension() != ".yaml") continue;
    INFO(e.path().string());
    Plan p = loadPlan({e.path().string(), {}, 2});
    CHECK(p.deepspeed.trainBatchSize > 0);
    ++n;
  }
  CHECK(n >= 1);
}

TEST_CASE("plan: examples/default.yaml is the built-in default plan", "[unit]") {
  Plan builtIn = loadPlan({"", {}, 2});
  Plan file = loadPlan({std::string(DS_SOURCE_DIR) + "/examples/default.yaml", {}, 2});
  CHECK(file.dsConfigJson == builtIn.dsConfigJson);
  CHECK(file.model.nLayer == builtIn.model.nLayer);
  CHECK(file.model.nEmbd == builtIn.model.nEmbd);
  CHECK(file.model.nHead == builtIn.model.nHead);
  CHECK(file.model.seqLen == builtIn.model.seqLen);
  CHECK(file.model.vocabSize == builtIn.model.vocabSize);
  CHECK(file.data.syntheticTokens == builtIn.data.syntheticTokens);
  CHECK(file.data.syntheticBranching == builtIn.data.syntheticBranching);
  CHECK(file.train.steps == builtIn.train.steps);
  CHECK(file.train.evalEvery == builtIn.train.evalEvery);
  CHECK(file.train.seed == builtIn.train.seed);
}

TEST_CASE("plan: wrong types and shapes are named", "[unit]") {
  CHECK(errorOf(kMini, {"train.steps=true"}) ==
        "--set train.steps: expected an integer, got 'true'");
  CHECK(errorOf(kMini, {"train.steps=1.5"}) == "--set train.steps: expected an integer, got '1.5'");
  CHECK(errorOf(kMini, {"train.steps=-1"}) == "--set train.steps: must be >= 0, got -1");
  CHECK(errorOf(kMini, {"deepspeed.optimizer.params.betas=[0.9]"}) ==
        "--set deepspeed.optimizer.params.betas: expected 2 numbers, got 1");
  CHECK(errorOf(kMini, {"deepspeed.gradient_clipping=[1]"}) ==
        "--set deepspeed.gradient_clipping: expected a number, got 'a list'");
  CHECK(errorOf(kMini, {"deepspeed.fp16=1"}) == "--set deepspeed.fp16: expected a map, got '1'");
  CHECK(errorOf(kMini, {"deepspeed.scheduler.type=WarmupLR",
                        "deepspeed.scheduler.params.warmup_type=cubic"}) ==
        "--set deepspeed.scheduler.params.warmup_type: expected one of log, linear, got 'cubic'");
  CHECK(errorOf("model:\n  mlp: {sizes: [16, 8]}\ndeepspeed: {train_batch_size: 8}\n") ==
        "plan.yaml:2:16: model.mlp.sizes: first and last size are the vocabulary (equal, <= 65536) "
        "for next-token training");
  CHECK(errorOf(std::string(kMini) + "data: {synthetic: {branching: 40}}\n") ==
        "plan.yaml:5:7: data.synthetic.branching: must be <= the vocabulary (32), got 40");
  CHECK(errorOf(std::string(kMini) + "data: {shards: a.bin, synthetic: {}}\n") ==
        "plan.yaml:5:16: data.shards: give either data.synthetic or data.shards, not both");
}

TEST_CASE("plan: a run shorter than the cosine warmup is fine, an explicit short total is not",
          "[unit]") {
  // The built-in plan warms up over 20 steps and takes total_num_steps from train.steps.
  for (int steps : {1, 10, 20, 21}) {
    Plan p = parsePlan(defaultPlanYaml(), "default", {"train.steps=" + std::to_string(steps)}, 2);
    CHECK(p.deepspeed.scheduler.totalNumSteps == steps);
  }
  CHECK_THAT(errorOf(defaultPlanYaml(), {"deepspeed.scheduler.params.total_num_steps=20"}),
             Catch::Contains("total_num_steps: WarmupCosineLR needs total_num_steps > "
                             "warmup_num_steps"));
}

TEST_CASE("plan: model.gpt.init_from resolves against the plan's folder and is a string",
          "[unit]") {
  const std::string yaml = R"(model:
  gpt: {n_layer: 1, n_head: 2, n_embd: 16, seq_len: 8, vocab_size: 32, init_from: w/gpt2.bin}
deepspeed:
  train_batch_size: 8
)";
  CHECK(parsePlan(kMini, "plan.yaml").initFrom.empty());
  CHECK(parsePlan(yaml, "plan.yaml", {}, 1, "/plans").initFrom == "/plans/w/gpt2.bin");
  CHECK(parsePlan(yaml, "plan.yaml", {"model.gpt.init_from=/abs/gpt2_124M.bin"}, 1, "/plans")
            .initFrom == "/abs/gpt2_124M.bin");
  CHECK(errorOf(kMini, {"model.gpt.init_from=[a]"}) ==
        "--set model.gpt.init_from: expected a string, got a list");
  CHECK(errorOf(kMini, {"model.gpt.init_from=''"}) ==
        "--set model.gpt.init_from: expected a file path, got ''");
  CHECK_THAT(errorOf("model:\n  mlp: {sizes: [16, 8, 16], init_from: x.bin}\n"
                     "deepspeed: {train_batch_size: 8}\n"),
             Contains("model.mlp.init_from: unknown key"));
}
