// DeepSpeed-style config files (tests/data/ds_config, modelled on DeepSpeed's and Hugging Face's
// own examples) load as a DeepSpeed user expects: aliases and legacy forms (bfloat16,
// cpu_offload, fp16.auto_cast, fp16_master_weights_and_grads), the aio, checkpoint, data_types
// blocks, Hugging Face "auto" values resolved from the plan, Lamb; refused keys all listed in one
// error, each as file:line:col: key: reason. The key table matches docs/plan.md.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "core/error.h"
#include "runtime/config/ds_config_keys.h"
#include "runtime/config/effective_config.h"
#include "runtime/config/plan_loader.h"

using namespace ds::runtime;

namespace {

const std::string kDir = std::string(DS_TEST_DATA_DIR) + "/ds_config/";

std::string planText(const std::string& file) {
  return "model:\n  gpt: {n_layer: 1, n_head: 2, n_embd: 16, seq_len: 8, vocab_size: 32}\n"
         "train: {steps: 10}\n"
         "deepspeed_config: " +
         kDir + file + "\n";
}

Plan load(const std::string& file, int world = 1, const std::vector<std::string>& sets = {}) {
  return parsePlan(planText(file), "plan.yaml", sets, world);
}

std::string errorOf(const std::string& file, int world = 1,
                    const std::vector<std::string>& sets = {}) {
  try {
    load(file, world, sets);
  } catch (const ds::ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

std::string originOf(const Plan& plan, const std::string& path) {
  for (const auto& k : effectiveConfig(plan))
    if (k.path == path) return k.value + " " + k.origin;
  return "(missing)";
}

}  // namespace

TEST_CASE("ds_config: legacy cpu_offload, fp16.auto_cast, fp16_master_weights_and_grads",
          "[unit]") {
  Plan p = load("legacy_cpu_offload.json", 2);
  CHECK(p.deepspeed.zero.offloadOptimizer.device == "cpu");
  CHECK(p.deepspeed.zero.offloadOptimizer.pinMemory);  // cpu_offload_use_pin_memory
  CHECK(p.deepspeed.zero.offloadParam.device == "none");
  CHECK(p.deepspeed.fp16.enabled);
  CHECK(p.deepspeed.microBatchPerGpu == 8);
  CHECK(originOf(p, "deepspeed.zero_optimization.offload_optimizer.device") ==
        "\"cpu\" ds_config (as zero_optimization.cpu_offload)");
  CHECK(originOf(p, "deepspeed.train_micro_batch_size_per_gpu") == "8 derived");
  bool autoCast = false;
  for (const auto& k : p.noEffectKeys) autoCast |= k[0] == "deepspeed.fp16.auto_cast";
  CHECK(autoCast);
  // the legacy switch and the block together are refused
  CHECK(errorOf("legacy_cpu_offload.json", 1,
                {"deepspeed.zero_optimization.offload_optimizer={device: cpu}"}) ==
        kDir +
            "legacy_cpu_offload.json:7:20: deepspeed.zero_optimization.cpu_offload: given twice "
            "(also as offload_optimizer; cpu_offload is its older form)");
  CHECK(errorOf("legacy_cpu_offload.json", 1, {"deepspeed.fp16_master_weights_and_grads=true"}) ==
        "--set deepspeed.fp16_master_weights_and_grads: master weights and gradients are fp32 "
        "(DeepSpeed allows true only with ZeRO-2 CPU offload) (accepted only as false, got "
        "'true')");
}

TEST_CASE("ds_config: the bfloat16 block, data_types and communication_data_type", "[unit]") {
  Plan p = load("bfloat16_block.json", 2);
  CHECK(p.deepspeed.bf16);
  CHECK(p.model.compute == ds::DType::kBF16);
  CHECK(p.deepspeed.trainBatchSize == 8);
  CHECK(originOf(p, "deepspeed.bf16.enabled") == "true ds_config (as bfloat16.enabled)");
  CHECK(errorOf("bfloat16_block.json", 1, {"deepspeed.bf16={enabled: true}"}) ==
        kDir +
            "bfloat16_block.json:14:15: deepspeed.bfloat16: given twice (also as bf16; "
            "bfloat16 is its older name)");
  CHECK(errorOf("bfloat16_block.json", 1, {"deepspeed.data_types.grad_accum_dtype=bf16"}) ==
        "--set deepspeed.data_types.grad_accum_dtype: gradients accumulate in the engine's "
        "gradient type here (fp32), got 'bf16'");
  CHECK(errorOf("bfloat16_block.json", 1, {"deepspeed.communication_data_type=fp16"}) ==
        "--set deepspeed.communication_data_type: gradients are reduced in fp32 here (fp32), got "
        "'fp16'");
}

TEST_CASE("ds_config: the aio block drives the NVMe swap files; checkpoint and profilers load",
          "[unit]") {
  Plan p = load("aio_nvme.json");
  CHECK(p.deepspeed.aio.blockSize == 262144);
  CHECK(p.deepspeed.aio.queueDepth == 32);
  CHECK(p.deepspeed.zero.offloadOptimizer.aio.blockSize == 262144);
  CHECK(p.deepspeed.zero.offloadParam.aio.queueDepth == 32);
  auto io = ds::zero::asyncFileOptions(p.deepspeed.zero.offloadParam.aio);
  CHECK(io.maxRequestBytes == 262144);
  CHECK(io.queueDepth == 32);
  std::set<std::string> noEffect;
  for (const auto& k : p.noEffectKeys) noEffect.insert(k[0]);
  for (const char* k :
       {"deepspeed.checkpoint.tag_validation", "deepspeed.checkpoint.load_universal",
        "deepspeed.flops_profiler", "deepspeed.comms_logger",
        "deepspeed.zero_optimization.offload_optimizer.pipeline_read",
        "deepspeed.zero_optimization.offload_param.max_in_cpu"})
    CHECK(noEffect.count(k) == 1);
  // without an aio block the swap files keep dsrun's defaults
  Plan none = load("legacy_cpu_offload.json");
  CHECK(ds::zero::asyncFileOptions(none.deepspeed.aio).maxRequestBytes == ds::zero::kMaxIoRequest);
  CHECK(errorOf("aio_nvme.json", 1, {"deepspeed.aio.use_gds=true"}) ==
        "--set deepspeed.aio.use_gds: GPUDirect Storage is not supported (swap files go through "
        "host memory)");
}

TEST_CASE("ds_config: Hugging Face \"auto\" values resolve from the plan", "[unit]") {
  Plan p = load("hf_zero3_auto.json", 2);
  const auto& d = p.deepspeed;
  CHECK(d.trainBatchSize == 16);  // auto: micro 4 x gas 2 x world 2
  CHECK(d.optimizer.lr == Approx(3e-4));
  CHECK(d.optimizer.beta1 == Approx(0.9));  // betas, eps, weight_decay: the defaults
  CHECK(d.optimizer.weightDecay == 0.f);
  CHECK(d.scheduler.warmupMaxLr == Approx(3e-4));  // the optimizer's lr
  CHECK(d.scheduler.warmupMinLr == 0.0);
  CHECK(d.scheduler.warmupNumSteps == 0);
  CHECK(d.zero.reduceBucketSize == 16 * 16);  // n_embd^2, as Hugging Face
  CHECK(d.zero.prefetchBucketSize == 230);    // 0.9 n_embd^2
  CHECK(d.zero.paramPersistenceThreshold == 160);
  CHECK_FALSE(d.bf16);
  CHECK(originOf(p, "deepspeed.train_batch_size") == "16 auto (derived)");
  CHECK(originOf(p, "deepspeed.zero_optimization.reduce_bucket_size") == "256 auto");
  CHECK(originOf(p, "deepspeed.bf16.enabled") == "false auto");
  // total_num_steps: train.steps
  Plan decay = load("hf_zero3_auto.json", 1,
                    {"deepspeed.scheduler.type=WarmupDecayLR",
                     "deepspeed.scheduler.params.total_num_steps=auto"});
  CHECK(decay.deepspeed.scheduler.totalNumSteps == 10);
  // every member of the batch triangle "auto" (two of them from --set, so the error names
  // --set): DeepSpeed's message, and what to give
  CHECK(errorOf("hf_zero3_auto.json", 2,
                {"deepspeed.train_micro_batch_size_per_gpu=auto",
                 "deepspeed.gradient_accumulation_steps=auto"}) ==
        std::string(
            "--set: deepspeed: Either train_batch_size or "
            "train_micro_batch_size_per_gpu needs to be provided (world size 2); \"auto\" "
            "train_batch_size, train_micro_batch_size_per_gpu, gradient_accumulation_steps are "
            "derived from the others (Hugging Face's Trainer sets them from its arguments): give "
            "train_micro_batch_size_per_gpu or train_batch_size"));
}

TEST_CASE("ds_config: an \"auto\" nothing determines is refused, every one in one run", "[unit]") {
  // gradient_clipping "auto" is the Trainer's max_grad_norm default, 1.0
  CHECK(load("hf_zero2_auto.json", 2).deepspeed.gradientClipping == 1.0);
  std::string two = errorOf("hf_zero2_auto.json", 1,
                            {"deepspeed.zero_optimization.allgather_bucket_size=auto",
                             "deepspeed.zero_optimization.sub_group_size=auto"});
  CHECK(two.rfind("2 problems in the DeepSpeed config:\n", 0) == 0);
  CHECK(two.find("--set deepspeed.zero_optimization.allgather_bucket_size: \"auto\" is filled in "
                 "by Hugging Face's Trainer; nothing in a dsrun plan determines this key: give a "
                 "value") != std::string::npos);
  // without them, every auto of the file resolves
  Plan p = load("hf_zero2_auto.json", 2);
  CHECK(p.deepspeed.trainBatchSize == 8);
  CHECK(p.deepspeed.scheduler.totalNumSteps == 10);
}

TEST_CASE("ds_config: several refused keys are all listed, each file:line:col: key: reason",
          "[unit]") {
  std::string e = errorOf("refused_many.json");
  INFO(e);
  const std::string f = kDir + "refused_many.json:";
  CHECK(e.rfind("8 problems in the DeepSpeed config:\n", 0) == 0);
  for (const std::string& line :
       {f + "13:16: deepspeed.amp.enabled: NVIDIA Apex AMP is not available; use fp16 or bf16 "
            "(accepted only as false, got 'true')",
        f + "21:16: deepspeed.wandb.enabled: Weights & Biases is a Python service; use "
            "tensorboard or csv_monitor (accepted only as false, got 'true')",
        f + "16:23: deepspeed.sparse_attention: sparse attention is not implemented (the GPT "
            "attention is dense)",
        f + "9:33: deepspeed.zero_optimization.zero_quantized_gradients: ZeRO++ quantized "
            "communication is a ZeRO stage 3 feature (as in DeepSpeed); set "
            "zero_optimization.stage to 3 or this key to false",
        f + "10:24: deepspeed.zero_optimization.mics_shard_size: MiCS shards ZeRO stage 3 state "
            "(as in DeepSpeed); set zero_optimization.stage to 3 or this key to -1",
        f + "24:22: deepspeed.steps_per_print: \"auto\" is filled in",
        f + "5:46: deepspeed.optimizer.params.max_grad_norm: not supported as an optimizer "
            "parameter; use the deepspeed parameter gradient_clipping",
        f + "25:3: deepspeed.gradient_clippin: unknown key (did you mean "
            "'deepspeed.gradient_clipping'?)"})
    CHECK(e.find("\n" + line) != std::string::npos);
}

TEST_CASE("ds_config: Lamb with DeepSpeed's parameters; refused above stage 0", "[unit]") {
  Plan p = load("lamb.json");
  const auto& o = p.deepspeed.optimizer;
  CHECK(o.type == "Lamb");
  CHECK(o.maxCoeff == Approx(0.3));
  CHECK(o.minCoeff == Approx(0.01));
  CHECK_FALSE(o.biasCorrection);
  CHECK(o.lr == Approx(0.011));
  CHECK(errorOf("lamb.json", 1, {"deepspeed.zero_optimization.stage=1"}) ==
        kDir +
            "lamb.json:6:16: deepspeed.optimizer: Lamb needs zero_optimization.stage 0 (stage is "
            "1): its trust ratio is per parameter, and stages 1-3 split parameters across ranks");
  CHECK(errorOf("lamb.json", 1, {"deepspeed.optimizer.type=Lion"}) ==
        "--set deepspeed.optimizer.type: 'Lion' is not implemented; use Adam, AdamW, Lamb, "
        "SGD, OneBitAdam, ZeroOneAdam or OneBitLamb");
}

TEST_CASE("ds_config: OneBitLamb with DeepSpeed's parameters; bad ones refused", "[unit]") {
  Plan p = load("onebit_lamb.json");
  const auto& o = p.deepspeed.optimizer;
  CHECK(o.type == "OneBitLamb");
  CHECK(o.compressed());
  CHECK(o.freezeStep == 1000);
  CHECK(o.lr == Approx(11e-3));
  CHECK(o.maxCoeff == Approx(0.3));
  CHECK(o.minCoeff == Approx(0.01));
  CHECK(o.coeffBeta == Approx(0.9));
  CHECK(o.factorMax == Approx(4.0));
  CHECK(o.factorMin == Approx(0.5));
  CHECK(o.factorThreshold == Approx(0.1));
  CHECK(o.commBackendName == "nccl");
  CHECK_FALSE(o.cudaAware);
  CHECK_FALSE(o.biasCorrection);
  const std::string set = "--set deepspeed.optimizer.params.";
  CHECK(errorOf("onebit_lamb.json", 1, {"deepspeed.optimizer.params.freeze_step=0"}) ==
        set + "freeze_step: must be >= 1, got 0");
  CHECK(errorOf("onebit_lamb.json", 1, {"deepspeed.optimizer.params.freeze_step=ten"}) ==
        set + "freeze_step: expected an integer, got 'ten'");
  CHECK(errorOf("onebit_lamb.json", 1, {"deepspeed.optimizer.params.coeff_beta=1"}) ==
        set + "coeff_beta: must be in [0, 1)");
  CHECK(errorOf("onebit_lamb.json", 1, {"deepspeed.optimizer.params.factor_min=0"}) ==
        set + "factor_min: must be > 0");
  CHECK(errorOf("onebit_lamb.json", 1, {"deepspeed.optimizer.params.factor_min=5"}) ==
        set + "factor_min: must be <= factor_max");
  CHECK(errorOf("onebit_lamb.json", 1, {"deepspeed.optimizer.params.factor_threshold=1.5"}) ==
        set + "factor_threshold: must be in [0, 1)");
  CHECK(errorOf("onebit_lamb.json", 1, {"deepspeed.optimizer.params.min_coeff=0.5"}) ==
        set + "min_coeff: must be <= max_coeff");
  // ZeroOneAdam's keys are not OneBitLamb's.
  CHECK(errorOf("onebit_lamb.json", 1, {"deepspeed.optimizer.params.var_freeze_step=10"})
            .find("deepspeed.optimizer.params.var_freeze_step") != std::string::npos);
  CHECK(errorOf("onebit_lamb.json", 2, {"deepspeed.zero_optimization.stage=2"}) ==
        kDir +
            "onebit_lamb.json:5:16: deepspeed.optimizer: OneBitLamb needs zero_optimization.stage "
            "0 (stage is 2), as in DeepSpeed: its momentum is averaged whole by a compressed "
            "allreduce");
  CHECK(
      errorOf("onebit_lamb.json", 1, {"deepspeed.optimizer.params.amsgrad=true"}).find("amsgrad") !=
      std::string::npos);
}

TEST_CASE("ds_config: OneBitAdam and ZeroOneAdam with DeepSpeed's parameters; bad ones refused",
          "[unit]") {
  Plan p = load("onebit_adam.json");
  const auto& o = p.deepspeed.optimizer;
  CHECK(o.type == "OneBitAdam");
  CHECK(o.freezeStep == 23000);
  CHECK(o.lr == Approx(4e-4));
  CHECK(o.commBackendName == "nccl");
  CHECK_FALSE(o.cudaAware);
  CHECK(o.biasCorrection);
  Plan z = load("zero_one_adam.json");
  const auto& zo = z.deepspeed.optimizer;
  CHECK(zo.type == "ZeroOneAdam");
  CHECK(zo.varFreezeStep == 1000);
  CHECK(zo.varUpdateScaler == 16);
  CHECK(zo.localStepScaler == 1000);
  CHECK(zo.localStepClipper == 16);
  CHECK(zo.commBackendName == "mpi");
  CHECK_FALSE(zo.biasCorrection);
  CHECK(errorOf("onebit_adam.json", 1, {"deepspeed.optimizer.params.freeze_step=0"}) ==
        "--set deepspeed.optimizer.params.freeze_step: must be >= 1, got 0");
  CHECK(errorOf("onebit_adam.json", 1, {"deepspeed.optimizer.params.freeze_step=1.5"}) ==
        "--set deepspeed.optimizer.params.freeze_step: expected an integer, got '1.5'");
  CHECK(errorOf("zero_one_adam.json", 1, {"deepspeed.optimizer.params.var_freeze_step=-3"}) ==
        "--set deepspeed.optimizer.params.var_freeze_step: must be >= 1, got -3");
  CHECK(errorOf("zero_one_adam.json", 1, {"deepspeed.optimizer.params.local_step_clipper=0"}) ==
        "--set deepspeed.optimizer.params.local_step_clipper: must be >= 1, got 0");
  // freeze_step belongs to OneBitAdam only.
  CHECK(errorOf("zero_one_adam.json", 1, {"deepspeed.optimizer.params.freeze_step=10"})
            .find("deepspeed.optimizer.params.freeze_step") != std::string::npos);
  CHECK(errorOf("onebit_adam.json", 1, {"deepspeed.optimizer.params.comm_backend_name=hccl"}) ==
        "--set deepspeed.optimizer.params.comm_backend_name: 'hccl' is not available; the "
        "compressed allreduce runs over the job's data-parallel group (nccl, mpi or gloo)");
  CHECK(errorOf("onebit_adam.json", 2, {"deepspeed.zero_optimization.stage=1"}) ==
        kDir +
            "onebit_adam.json:5:16: deepspeed.optimizer: OneBitAdam needs zero_optimization.stage "
            "0 (stage is 1), as in DeepSpeed: its momentum is averaged whole by a compressed "
            "allreduce");
  CHECK(errorOf("zero_one_adam.json", 2, {"deepspeed.bf16.enabled=true"})
            .find("ZeroOneAdam with bf16.enabled is not supported") != std::string::npos);
  CHECK(
      errorOf("onebit_adam.json", 1, {"deepspeed.optimizer.params.amsgrad=true"}).find("amsgrad") !=
      std::string::npos);
}

TEST_CASE("ds_config: every key of the table is documented in docs/plan.md", "[unit]") {
  std::ifstream in(std::string(DS_TEST_DATA_DIR) + "/../../docs/plan.md");
  REQUIRE(in);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str();
  for (const auto& rule : dsKeyRules()) {
    INFO(rule.path);
    CHECK(doc.find("`" + std::string(rule.path) + "`") != std::string::npos);
  }
}
