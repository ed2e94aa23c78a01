// The 3D layout: rank placement (tensor fastest, then data, then pipeline), the groups of each
// axis, and the refusals of layouts that do not divide the world or the model, in the plan too.
#include <catch2/catch.hpp>

#include <set>

#include "core/error.h"
#include "runtime/config/parallel_grid.h"
#include "runtime/config/plan_loader.h"

using namespace ds::runtime;
using Catch::Matchers::Contains;

namespace {
ParallelPlan layout(int pipeline, int tensor) {
  ParallelPlan plan;
  plan.pipeline = pipeline;
  plan.tensor = tensor;
  return plan;
}

std::string gridError(int world, ParallelPlan p, ModelShape m = {}) {
  try {
    ParallelGrid(world, p).checkModel(m);
  } catch (const ds::ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

std::string planError(const std::string& parallel, int world,
                      const std::vector<std::string>& overrides = {}) {
  std::string yaml =
      "model:\n  gpt: {n_layer: 4, n_head: 4, n_embd: 32, seq_len: 8, "
      "vocab_size: 64}\ndeepspeed:\n  train_batch_size: 8\n" +
      parallel;
  try {
    parsePlan(yaml, "plan.yaml", overrides, world);
  } catch (const ds::ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}
}  // namespace

TEST_CASE("parallel grid: Megatron placement, tensor fastest then data then pipeline", "[unit]") {
  ParallelGrid g(8, layout(2, 2));  // P=2, T=2 -> D=2
  CHECK(g.data() == 2);
  for (int r = 0; r < 8; ++r) CHECK(g.rankOf(g.coordOf(r)) == r);
  CHECK(g.coordOf(5).tensor == 1);
  CHECK(g.coordOf(5).data == 0);
  CHECK(g.coordOf(5).pipeline == 1);
  CHECK(g.tensorGroup(5) == std::vector<int>{4, 5});
  CHECK(g.dataGroup(5) == std::vector<int>{5, 7});
  CHECK(g.pipelineGroup(5) == std::vector<int>{1, 5});
  for (const char* axis : {"tensor", "pipeline", "data"}) {
    auto groups = g.allGroups(axis);
    CHECK(groups.size() == 4);
    std::set<int> seen;  // the groups of one axis partition the world
    for (auto& grp : groups)
      for (int r : grp) CHECK(seen.insert(r).second);
    CHECK(seen.size() == 8);
  }
  CHECK_THAT(g.describe(), Contains("world 8 = data 2 x pipeline 2 x tensor 2"));
  CHECK_THAT(g.describe(), Contains("rank 5: data 0 pipeline 1 tensor 1"));
  ParallelGrid one(3, {});
  CHECK(one.data() == 3);
  CHECK(one.dataGroup(1) == std::vector<int>{0, 1, 2});
}

TEST_CASE("parallel grid: refusals name the numbers", "[unit]") {
  auto e = gridError(6, layout(2, 2));
  CHECK_THAT(e, Contains("world size 6") && Contains("pipeline 2") && Contains("tensor 2"));
  CHECK_THAT(gridError(4, layout(1, 2), {4, 3, 12, 64}),
             Contains("attention heads") && Contains("(3)"));
  CHECK_THAT(gridError(4, layout(1, 4), {4, 4, 30, 64}), Contains("width"));
  CHECK_THAT(gridError(2, layout(1, 2), {4, 2, 16, 51}),
             Contains("vocabulary") && Contains("(51)"));
  CHECK_THAT(gridError(4, layout(4, 1), {3, 2, 16, 64}), Contains("blocks") && Contains("(3,"));
  CHECK_THAT(gridError(2, layout(2, 1), {3, 2, 16, 64}),  // the default, uniform split
             Contains("does not divide") && Contains("(3,") && Contains("partition_method"));
  ParallelPlan byParams = layout(2, 1);
  byParams.partition = PartitionMethod::kParameters;
  CHECK(gridError(2, byParams, {3, 2, 16, 64}) == "(no error)");  // uneven stages asked for
  CHECK(gridError(4, layout(2, 2), {4, 4, 32, 64}) == "(no error)");
}

TEST_CASE("parallel grid: the plan block", "[unit]") {
  CHECK(planError("", 4) == "(no error)");
  CHECK(planError("parallel: {pipeline: 1, tensor: 1}\n", 2) == "(no error)");
  CHECK_THAT(planError("parallel: {pipeline: 2, tensor: 2}\n", 6),
             Contains("plan.yaml") && Contains("world size 6") && Contains("pipeline 2"));
  CHECK_THAT(planError("parallel: {tensor: 3}\n", 3), Contains("attention heads"));
  CHECK_THAT(planError("parallel: {tensor: 2, pipelines: 2}\n", 4), Contains("pipelines"));
  // Tensor parallelism runs alone (tensor_run.h) and under a pipeline (P x T, pipeline_run.h);
  // what the pipeline cannot run (ZeRO 2/3, fewer micro-batches than stages) is still refused at
  // load, naming the numbers.
  CHECK(planError("parallel: {tensor: 2}\n", 4) == "(no error)");
  CHECK(planError("parallel: {pipeline: 2, tensor: 2}\n", 4,
                  {"deepspeed.gradient_accumulation_steps=2"}) == "(no error)");
  CHECK_THAT(
      planError("parallel: {pipeline: 2, tensor: 2}\n", 4,
                {"deepspeed.gradient_accumulation_steps=2", "deepspeed.zero_optimization.stage=2"}),
      Contains("stage 2") && Contains("pipeline"));
  CHECK_THAT(planError("parallel: {pipeline: 2, tensor: 2}\n", 4,
                       {"deepspeed.gradient_accumulation_steps=1"}),
             Contains("gradient_accumulation_steps 1"));
}

// Pipeline parallelism runs (pipeline_run.h): the batch triangle is resolved over the data axis
// (DeepSpeed: train_batch_size = micro x gas x data-parallel ranks), and what 1F1B cannot run is
// refused at load, naming the numbers.
TEST_CASE("parallel grid: a pipeline plan resolves its batch over the data axis", "[unit]") {
  const std::string two = "parallel: {pipeline: 2}\n";
  const std::vector<std::string> gas4 = {"deepspeed.gradient_accumulation_steps=4"};
  CHECK(planError(two, 4, gas4) == "(no error)");
  Plan plan = parsePlan(
      "model:\n  gpt: {n_layer: 4, n_head: 4, n_embd: 32, seq_len: 8, vocab_size: 64}\n"
      "deepspeed:\n  train_batch_size: 8\n  gradient_accumulation_steps: 4\n" +
          two,
      "plan.yaml", {}, 4);
  CHECK(plan.dataParallel() == 2);
  CHECK(plan.deepspeed.microBatchPerGpu == 1);  // 8 / (4 x 2 data ranks)
  CHECK_THAT(planError(two, 4, {"deepspeed.gradient_accumulation_steps=1"}),
             Contains("plan.yaml") && Contains("gradient_accumulation_steps 1") &&
                 Contains("parallel.pipeline = 2"));
  CHECK_THAT(
      planError(two, 4,
                {"deepspeed.gradient_accumulation_steps=4", "deepspeed.zero_optimization.stage=2"}),
      Contains("zero_optimization.stage 2") && Contains("parallel.pipeline = 2"));
  CHECK_THAT(
      planError(two, 2,
                {"deepspeed.gradient_accumulation_steps=4", "deepspeed.zero_optimization.stage=3"}),
      Contains("zero_optimization.stage 3"));
  CHECK_THAT(planError("parallel: {pipeline: 8}\n", 8), Contains("blocks") && Contains("(4,"));
}

// How the layers spread over the stages: DeepSpeed's partition_method (parameters by default,
// uniform) or our explicit parallel.stage_layers.
TEST_CASE("parallel grid: partition_method and stage_layers", "[unit]") {
  const std::vector<std::string> gas4 = {"deepspeed.gradient_accumulation_steps=4"};
  auto parsed = [&](const std::string& block) {
    return parsePlan(
               "model:\n  gpt: {n_layer: 4, n_head: 4, n_embd: 32, seq_len: 8, vocab_size: 64}\n"
               "deepspeed:\n  train_batch_size: 8\n  gradient_accumulation_steps: 4\n" +
                   block,
               "plan.yaml", {}, 2)
        .parallel;
  };
  CHECK(parsed("parallel: {pipeline: 2}\n").partition == PartitionMethod::kUniform);
  CHECK(parsed("parallel: {pipeline: 2, partition_method: Parameters}\n").partition ==
        PartitionMethod::kParameters);
  const auto given = parsed("parallel: {pipeline: 2, stage_layers: [1, 3]}\n");
  CHECK(given.partition == PartitionMethod::kExplicit);
  CHECK(given.stageLayers == std::vector<int>{1, 3});
  CHECK_THAT(planError("parallel: {pipeline: 3}\n", 3, gas4),  // 4 layers, 3 stages, uniform
             Contains("plan.yaml") && Contains("pipeline = 3") && Contains("(4,"));
  CHECK(planError("parallel: {pipeline: 3, partition_method: parameters}\n", 3, gas4) ==
        "(no error)");
  CHECK_THAT(planError("parallel: {pipeline: 2, partition_method: balanced}\n", 2, gas4),
             Contains("partition_method") && Contains("balanced") && Contains("uniform"));
  CHECK_THAT(planError("parallel: {pipeline: 2, partition_method: 'type:Block'}\n", 2, gas4),
             Contains("type:Block") && Contains("uniform"));
  CHECK_THAT(planError("parallel: {pipeline: 2, stage_layers: [1, 2]}\n", 2, gas4),
             Contains("plan.yaml") && Contains("stage_layers") && Contains("sums to 3") &&
                 Contains("has 4"));
  CHECK_THAT(planError("parallel: {pipeline: 2, stage_layers: [4]}\n", 2, gas4),
             Contains("1 entries") && Contains("parallel.pipeline = 2"));
  CHECK_THAT(planError("parallel: {pipeline: 2, stage_layers: [0, 4]}\n", 2, gas4),
             Contains("stage_layers") && Contains("[1,"));
  // The interleaved schedule: equal chunks over P x v, micro-batches in whole groups of P.
  CHECK(parsed("parallel: {pipeline: 2, virtual_stages: 2}\n").virtualStages == 2);
  CHECK_THAT(planError("parallel: {virtual_stages: 2}\n", 2, gas4),
             Contains("virtual_stages") && Contains("parallel.pipeline > 1"));
  CHECK_THAT(planError("parallel: {pipeline: 2, virtual_stages: 3}\n", 2, gas4),
             Contains("4 layers") && Contains("pipeline 2 x virtual_stages 3 = 6"));
  CHECK_THAT(planError("parallel: {pipeline: 2, virtual_stages: 2, partition_method: parameters}\n",
                       2, gas4),
             Contains("uniformly"));
  CHECK_THAT(planError("parallel: {pipeline: 2, virtual_stages: 2}\n", 2,
                       {"deepspeed.gradient_accumulation_steps=3", "deepspeed.train_batch_size=6"}),
             Contains("gradient_accumulation_steps 3") && Contains("multiple of") &&
                 Contains("virtual_stages = 2"));
  CHECK_THAT(planError("parallel: {pipeline: 2, stage_layers: [1, 3], partition_method: uniform}\n",
                       2, gas4),
             Contains("not both"));
}
