// zero_optimization keys that the engine does not honour in every value are refused by the plan
// loader, with the key path, the file position and what is supported (no silent fallback);
// reduce_scatter=false is honoured at stages 1/2 (allreduce-based gradient reduction) and refused
// at stage 3; performance-only DeepSpeed keys still load.
#include <catch2/catch.hpp>

#include "core/error.h"
#include "runtime/config/plan_loader.h"

using namespace ds::runtime;

namespace {
const char* kMini = R"(model:
  gpt: {n_layer: 1, n_head: 2, n_embd: 16, seq_len: 8, vocab_size: 32}
deepspeed:
  train_batch_size: 8
)";

std::string errorOf(const std::string& zero) {
  try {
    parsePlan(std::string(kMini) + "  zero_optimization: " + zero + "\n", "plan.yaml", {}, 1);
  } catch (const ds::ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}
}  // namespace

TEST_CASE("plan: zero_optimization keys the engine cannot honour are refused", "[unit]") {
  CHECK(errorOf("{stage: 2, contiguous_gradients: false}") ==
        "plan.yaml:5:55: deepspeed.zero_optimization.contiguous_gradients: false is not "
        "supported (stages 2 and 3 always copy finished gradients into contiguous bucket "
        "buffers; use true)");
  CHECK(errorOf("{stage: 3, reduce_scatter: false}") ==
        "plan.yaml:5:49: deepspeed.zero_optimization.reduce_scatter: false is supported at "
        "stages 0-2 only (stage 3 always reduce-scatters its per-parameter gradients)");
  CHECK(errorOf("{stage: 1, allgather_partitions: false}") ==
        "plan.yaml:5:55: deepspeed.zero_optimization.allgather_partitions: false "
        "(broadcast-based parameter gathering) is not supported; parameters are always "
        "allgathered (use true)");
  CHECK(errorOf("{stage: 1, load_from_fp32_weights: false}") ==
        "plan.yaml:5:57: deepspeed.zero_optimization.load_from_fp32_weights: false is not "
        "supported; checkpoints always restore the fp32 master weights (use true)");
  CHECK(errorOf("{stage: 3, ignore_unused_parameters: false}") ==
        "plan.yaml:5:59: deepspeed.zero_optimization.ignore_unused_parameters: false is not "
        "supported; a parameter without a gradient always counts as a zero gradient (use true)");
}

TEST_CASE("plan: reduce_scatter false is honoured at stages 1 and 2", "[unit]") {
  for (const char* st : {"1", "2"}) {
    Plan p = parsePlan(kMini, "plan.yaml",
                       {std::string("deepspeed.zero_optimization.stage=") + st,
                        "deepspeed.zero_optimization.reduce_scatter=false"},
                       1);
    CHECK_FALSE(p.deepspeed.zero.reduceScatter);
    CHECK(p.dsConfigJson.find("\"reduce_scatter\": false") != std::string::npos);
  }
  Plan d = parsePlan(kMini, "plan.yaml", {}, 1);
  CHECK(d.deepspeed.zero.reduceScatter);
  // the DeepSpeed defaults of the refused keys, and the performance-only keys, load
  CHECK(errorOf("{stage: 3, contiguous_gradients: true, allgather_partitions: true, "
                "load_from_fp32_weights: true, ignore_unused_parameters: true, "
                "round_robin_gradients: true, memory_efficient_linear: false, "
                "stage3_max_reuse_distance: 0}") == "(no error)");
}
