// dsKeyRules, applyKeyRules, resolveAuto: see ds_config_keys.h. The reasons are the user-facing
// text of docs/plan.md's "DeepSpeed keys" table (a test checks every path is there).
#include "runtime/config/ds_config_keys.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <set>

#include <fmt/format.h>

namespace ds::runtime {
namespace {

constexpr KeyRule kNo = KeyRule::kNoEffect, kOnly = KeyRule::kOnly, kRef = KeyRule::kRefused;

// Children come before their block: a block entry then takes whatever is left in it.
const std::vector<DsKeyRule> kRules = {
    // top level
    {"dump_state", kNo, nullptr,
     "DeepSpeed's printout of its engine state; `dsrt check` prints the effective config"},
    {"memory_breakdown", kNo, nullptr,
     "DeepSpeed's per-step memory printout; dsrt prints its memory table at start and in the run "
     "summary"},
    {"disable_allgather", kNo, nullptr, "unused by DeepSpeed's engine too"},
    {"sparse_gradients", kNo, nullptr,
     "sparse embedding gradients; the embedding gradients here are dense and reduce to the same "
     "sums"},
    {"dataloader_drop_last", kNo, nullptr,
     "DeepSpeed's PyTorch dataloader; dsrt's loader always takes whole global batches"},
    {"log_level", kNo, nullptr, "DeepSpeed's Python logger; dsrt's level is DS_LOG_LEVEL"},
    {"graph_harvesting", kNo, nullptr, "CUDA-graph replay of the step: speed only"},
    {"use_data_before_expert_parallelism", kNo, nullptr,
     "mixture-of-experts process topology; no experts here"},
    {"seq_parallel_communication_data_type", kNo, nullptr, "sequence parallelism is not used"},
    {"vocabulary_size", kNo, nullptr, "the model block sets the vocabulary"},
    {"zero_allow_untested_optimizer", kNo, nullptr,
     "every optimizer dsrt has runs under ZeRO (Lamb at stage 0)"},
    {"zero_force_ds_cpu_optimizer", kNo, nullptr,
     "dsrt's optimizers are always its own CPU kernels"},
    {"compile", kNo, nullptr, "torch.compile / DeepCompile settings; the model is compiled C++"},
    {"timers", kNo, nullptr,
     "timer synchronization; dsrt's step timings are taken after the work completes"},
    {"flops_profiler", kNo, nullptr,
     "the per-module profile is not produced; the run summary reports timing.gflops"},
    {"comms_logger", kNo, nullptr,
     "per-collective logging is not produced; the step line and run summary give communication "
     "time"},
    {"pipeline", kNo, nullptr,
     "settings of DeepSpeed's PipelineEngine, used only with a PipelineModule; dsrt runs data "
     "parallelism"},
    {"prescale_gradients", kOnly, "false",
     "not supported (gradients are averaged after reduction)"},
    {"gradient_predivide_factor", kOnly, "1",
     "only 1.0 is supported (gradients are averaged after reduction)"},
    {"gradient_allreduce_op", kOnly, "mean",
     "gradients are averaged over the data-parallel ranks (mean); sum is not implemented"},
    {"managed_gradient_accumulation", kOnly, "false", "not implemented"},
    {"sequence_parallel_size", kOnly, "1",
     "sequence parallelism is not implemented (data parallelism only)"},
    {"fp16_master_weights_and_grads", kOnly, "false",
     "master weights and gradients are fp32 (DeepSpeed allows true only with ZeRO-2 CPU offload)"},
    {"amp.enabled", kOnly, "false", "NVIDIA Apex AMP is not available; use fp16 or bf16"},
    {"amp", kNo, nullptr, "Apex AMP options apply only when amp.enabled is true"},
    {"torch_autocast.enabled", kOnly, "false",
     "torch autocast does not apply to the native model; use bf16 or fp16"},
    {"torch_autocast", kNo, nullptr,
     "autocast options apply only when torch_autocast.enabled is true"},
    {"wandb.enabled", kOnly, "false",
     "Weights & Biases is a Python service; use tensorboard or csv_monitor"},
    {"wandb", kNo, nullptr, "used only when wandb.enabled is true"},
    {"comet.enabled", kOnly, "false", "Comet is a Python service; use tensorboard or csv_monitor"},
    {"comet", kNo, nullptr, "used only when comet.enabled is true"},
    {"nebula.enabled", kOnly, "false", "the Azure Nebula checkpoint service is not available"},
    {"nebula", kNo, nullptr, "used only when nebula.enabled is true"},
    {"elasticity.enabled", kOnly, "false",
     "elastic training (the batch re-planned for a changing GPU count) is not implemented"},
    {"elasticity", kNo, nullptr, "used only when elasticity.enabled is true"},
    {"autotuning.enabled", kOnly, "false", "the autotuner is not implemented"},
    {"autotuning", kNo, nullptr, "used only when autotuning.enabled is true"},
    {"curriculum_learning.enabled", kOnly, "false", "curriculum learning is not implemented"},
    {"curriculum_learning", kNo, nullptr, "used only when curriculum_learning.enabled is true"},
    {"data_efficiency.enabled", kOnly, "false",
     "data efficiency (data sampling, random-LTD) is not implemented"},
    {"data_efficiency", kNo, nullptr, "used only when data_efficiency.enabled is true"},
    {"progressive_layer_drop.enabled", kOnly, "false",
     "progressive layer dropping is not implemented"},
    {"progressive_layer_drop", kNo, nullptr,
     "used only when progressive_layer_drop.enabled is true"},
    {"eigenvalue.enabled", kOnly, "false", "the eigenvalue computation is not implemented"},
    {"eigenvalue", kNo, nullptr, "used only when eigenvalue.enabled is true"},
    {"quantize_training.enabled", kOnly, "false", "quantization-aware training is not implemented"},
    {"quantize_training", kNo, nullptr, "used only when quantize_training.enabled is true"},
    {"hybrid_engine.enabled", kOnly, "false", "the RLHF hybrid engine is not implemented"},
    {"hybrid_engine", kNo, nullptr, "used only when hybrid_engine.enabled is true"},
    {"tensor_parallel.autotp_size", kOnly, "1",
     "DeepSpeed's AutoTP is not implemented; use the plan's parallel.tensor (Megatron split)"},
    {"tensor_parallel", kNo, nullptr, "used only with tensor_parallel.autotp_size > 1"},
    {"compression_training", kRef, nullptr,
     "model compression (quantization, pruning, layer reduction) is not implemented"},
    {"sparse_attention", kRef, nullptr,
     "sparse attention is not implemented (the GPT attention is dense)"},
    {"weight_quantization", kRef, nullptr, "weight quantization is not implemented"},
    {"expert_parallel", kRef, nullptr, "mixture of experts is not implemented"},
    // checkpoint
    {"checkpoint.tag_validation", kNo, nullptr,
     "checkpoint tags come from the step, the same on every rank"},
    {"checkpoint.load_universal", kNo, nullptr,
     "dsrt's checkpoints already load at any world size and ZeRO stage"},
    {"checkpoint.use_node_local_storage", kNo, nullptr,
     "where each rank writes is train.checkpoint.dir on its host; this switch changes nothing"},
    {"checkpoint.parallel_write", kNo, nullptr,
     "pipeline-stage parallel writes; no pipeline parallelism"},
    {"checkpoint.writer", kNo, nullptr,
     "DeepSpeed's fast checkpoint writer; dsrt writes its files itself (atomically)"},
    {"checkpoint.serialization", kNo, nullptr,
     "torch serialization; dsrt's checkpoint format is its own"},
    // precision blocks
    {"fp16.auto_cast", kNo, nullptr,
     "casts the model's float inputs in DeepSpeed; dsrt's inputs are token ids"},
    {"fp16.fp16_master_weights_and_grads", kOnly, "false",
     "master weights and gradients are fp32 (DeepSpeed allows true only with ZeRO-2 CPU offload)"},
    {"bf16.immediate_grad_update", kNo, nullptr,
     "gradients accumulate in fp32 and are applied at the step"},
    {"bf16.check_grad_overflow", kNo, nullptr,
     "gradients are always checked for inf/NaN before the step"},
    {"bf16.bf16_master_weights_and_grads", kOnly, "false", "master weights and gradients are fp32"},
    {"bf16.bf16_optimizer_states", kOnly, "false", "optimizer states are fp32"},
    {"bfloat16.immediate_grad_update", kNo, nullptr, "as bf16.immediate_grad_update"},
    {"bfloat16.check_grad_overflow", kNo, nullptr, "as bf16.check_grad_overflow"},
    {"bfloat16.bf16_master_weights_and_grads", kOnly, "false",
     "master weights and gradients are fp32"},
    {"bfloat16.bf16_optimizer_states", kOnly, "false", "optimizer states are fp32"},
    // optimizer
    {"optimizer.legacy_fusion", kNo, nullptr,
     "an old fused-kernel switch; dsrt's kernels are its own"},
    {"optimizer.params.torch_adam", kNo, nullptr,
     "chooses PyTorch's Adam kernel; dsrt's Adam is DeepSpeed's formula either way"},
    // activation checkpointing
    {"activation_checkpointing.number_checkpoints", kNo, nullptr,
     "dsrt checkpoints every transformer block"},
    {"activation_checkpointing.partition_activations", kOnly, "false",
     "not supported (use activation_checkpointing.enabled)"},
    {"activation_checkpointing.cpu_checkpointing", kOnly, "false",
     "not supported (use activation_checkpointing.enabled)"},
    {"activation_checkpointing.contiguous_memory_optimization", kOnly, "false",
     "not supported (use activation_checkpointing.enabled)"},
    {"activation_checkpointing.synchronize_checkpoint_boundary", kOnly, "false",
     "not supported (use activation_checkpointing.enabled)"},
    {"activation_checkpointing.profile", kOnly, "false",
     "not supported (use activation_checkpointing.enabled)"},
    // zero_optimization
    {"zero_optimization.round_robin_gradients", kNo, nullptr,
     "gradient partition order across ranks: speed only"},
    {"zero_optimization.use_multi_rank_bucket_allreduce", kNo, nullptr,
     "bucket reduction strategy: speed only"},
    {"zero_optimization.memory_efficient_linear", kNo, nullptr,
     "a PyTorch autograd memory saving; the native layers keep no extra copies"},
    {"zero_optimization.stage3_max_reuse_distance", kNo, nullptr,
     "stage 3 releases a block's gathered parameters after the block"},
    {"zero_optimization.max_reuse_distance", kNo, nullptr, "as stage3_max_reuse_distance"},
    {"zero_optimization.stage3_gather_16bit_weights_on_model_save", kNo, nullptr,
     "checkpoints hold the fp32 master; `dsrt export-checkpoint` writes consolidated weights"},
    {"zero_optimization.gather_16bit_weights_on_model_save", kNo, nullptr,
     "as stage3_gather_16bit_weights_on_model_save"},
    {"zero_optimization.stage3_gather_fp16_weights_on_model_save", kNo, nullptr,
     "as stage3_gather_16bit_weights_on_model_save (DeepSpeed's deprecated name)"},
    {"zero_optimization.stage3_model_persistence_threshold", kNo, nullptr,
     "a model-wide cap on persistent parameters: memory only"},
    {"zero_optimization.model_persistence_threshold", kNo, nullptr,
     "as stage3_model_persistence_threshold"},
    {"zero_optimization.stage3_module_granularity_threshold", kNo, nullptr,
     "groups small PyTorch modules for prefetch; dsrt gathers per transformer block"},
    {"zero_optimization.module_granularity_threshold", kNo, nullptr,
     "as stage3_module_granularity_threshold"},
    {"zero_optimization.stage3_use_all_reduce_for_fetch_params", kNo, nullptr,
     "how parameters are fetched: the same values either way"},
    {"zero_optimization.use_all_reduce_for_fetch_params", kNo, nullptr,
     "as stage3_use_all_reduce_for_fetch_params"},
    {"zero_optimization.stage3_allgather_sequential", kNo, nullptr,
     "allgather ordering: the same values either way"},
    {"zero_optimization.allgather_sequential", kNo, nullptr, "as stage3_allgather_sequential"},
    {"zero_optimization.legacy_stage1", kNo, nullptr,
     "an older stage-1 partition layout: the same training"},
    {"zero_optimization.pipeline_loading_checkpoint", kNo, nullptr,
     "pipeline-parallel checkpoint loading; no pipeline parallelism"},
    {"zero_optimization.override_module_apply", kNo, nullptr, "a PyTorch module hook"},
    {"zero_optimization.log_trace_cache_warnings", kNo, nullptr,
     "DeepSpeed's stage-3 trace cache does not exist here"},
    {"zero_optimization.enable_sanity_checks", kNo, nullptr,
     "DeepSpeed's extra stage-3 debugging checks"},
    {"zero_optimization.save_muon_momentum_buffer_in_memory", kNo, nullptr,
     "an option of the Muon optimizer, which optimizer.type refuses"},
    {"zero_optimization.leaf_module", kNo, nullptr,
     "PyTorch module classes to fetch whole at stage 3; dsrt fetches per transformer block"},
    {"zero_optimization.elastic_checkpoint", kOnly, "false",
     "DeepSpeed no longer supports it either; dsrt's checkpoints load at any world size"},
    {"zero_optimization.zero_quantized_nontrainable_weights", kOnly, "false",
     "ZeRO++ quantized weights are not implemented"},
    {"zero_optimization.zeropp_loco_param", kRef, nullptr, "ZeRO++ LoCo is not implemented"},
    {"zero_optimization.zenflow", kRef, nullptr, "ZenFlow (stall-free offload) is not implemented"},
    {"zero_optimization.offload_optimizer.pipeline_read", kNo, nullptr,
     "the NVMe tile pipeline always overlaps reads and writes with the update"},
    {"zero_optimization.offload_optimizer.pipeline_write", kNo, nullptr, "as pipeline_read"},
    {"zero_optimization.offload_optimizer.pipeline", kNo, nullptr, "as pipeline_read"},
    {"zero_optimization.offload_optimizer.fast_init", kNo, nullptr,
     "swap files are created at start either way"},
    {"zero_optimization.offload_optimizer.cpuadam_cores_perc", kNo, nullptr,
     "the CPU optimizer uses OpenMP's threads (OMP_NUM_THREADS)"},
    {"zero_optimization.offload_optimizer.ratio", kOnly, "1",
     "only 1.0 is supported (the whole optimizer is offloaded)"},
    {"zero_optimization.offload_optimizer.super_offload", kOnly, "false",
     "SuperOffload is not implemented"},
    {"zero_optimization.offload_param.buffer_size", kNo, nullptr,
     "parameter swap buffers are sized per block"},
    {"zero_optimization.offload_param.max_in_cpu", kNo, nullptr,
     "parameters are not cached in CPU memory beyond the gathered block"},
};

std::string lower(std::string s) {
  for (auto& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::vector<std::string> split(const std::string& path) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    size_t dot = path.find('.', start);
    parts.push_back(path.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) return parts;
    start = dot + 1;
  }
}

// The map that holds `parts.back()`, or an undefined node when a step is missing or no map.
YAML::Node parentOf(YAML::Node root, const std::vector<std::string>& parts) {
  YAML::Node cur;
  cur.reset(root);
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    if (!cur.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
    const YAML::Node& c = cur;
    YAML::Node next = c[parts[i]];
    if (!next) return YAML::Node(YAML::NodeType::Undefined);
    cur.reset(next);
  }
  return cur.IsMap() ? cur : YAML::Node(YAML::NodeType::Undefined);
}

std::string show(const YAML::Node& n) {
  if (n.IsScalar()) return n.Scalar();
  if (n.IsSequence()) return "a list";
  if (n.IsMap()) return "a map";
  return "null";
}

bool sameValue(const std::string& text, const std::string& allowed) {
  if (lower(text) == lower(allowed)) return true;
  char* end = nullptr;
  double a = std::strtod(text.c_str(), &end);
  if (text.empty() || *end) return false;
  double b = std::strtod(allowed.c_str(), &end);
  return !*end && a == b;
}

std::string positionOf(const ReadContext& ctx, const YAML::Node& n, const std::string& path) {
  if (ctx.overridden.count(path)) return "--set ";
  auto m = n.Mark();
  if (m.line < 0) return ctx.source + ": ";
  return fmt::format("{}:{}:{}: ", ctx.source, m.line + 1, m.column + 1);
}

}  // namespace

const std::vector<DsKeyRule>& dsKeyRules() { return kRules; }

void acceptRuleKeys(NodeReader& r) {
  const std::string prefix = "deepspeed";
  if (r.path().rfind(prefix, 0) != 0) return;
  std::string block = r.path().size() > prefix.size() ? r.path().substr(prefix.size() + 1) : "";
  for (const auto& rule : kRules) {
    std::string path = rule.path;
    size_t dot = path.rfind('.');
    std::string parent = dot == std::string::npos ? "" : path.substr(0, dot);
    if (parent == block) r.accept(dot == std::string::npos ? path : path.substr(dot + 1));
  }
}

void applyKeyRules(YAML::Node ds, const std::string& prefix, const ReadContext& ctx,
                   std::vector<std::string>& errors, std::vector<NoEffectKey>& noEffect) {
  if (!ds || !ds.IsMap()) return;
  std::set<std::string> emptied;  // blocks a rule took keys out of
  for (const auto& rule : kRules) {
    auto parts = split(rule.path);
    YAML::Node parent = parentOf(ds, parts);
    if (!parent.IsDefined()) continue;
    const YAML::Node& cparent = parent;
    YAML::Node value = cparent[parts.back()];
    if (!value) continue;
    const std::string path = prefix + "." + rule.path;
    if (value.IsNull()) {
      parent.remove(parts.back());
      continue;
    }
    const std::string text = show(value);
    bool refused =
        rule.rule == KeyRule::kRefused ||
        (rule.rule == KeyRule::kOnly && !(value.IsScalar() && sameValue(text, rule.allowed)));
    if (refused) {
      std::string got = rule.rule == KeyRule::kOnly
                            ? fmt::format(" (accepted only as {}, got '{}')", rule.allowed, text)
                            : "";
      errors.push_back(positionOf(ctx, value, path) + path + ": " + rule.why + got);
    } else {
      noEffect.push_back({path, text, rule.why});
    }
    parent.remove(parts.back());
    const std::string rel = rule.path;
    if (parts.size() > 1) emptied.insert(rel.substr(0, rel.rfind('.')));
  }
  // A block left empty (every key in it taken by a rule, e.g. checkpoint) goes too, innermost
  // first (the set is ordered, so "a.b" comes after "a": walk it backwards).
  for (auto it = emptied.rbegin(); it != emptied.rend(); ++it) {
    auto parts = split(*it);
    YAML::Node parent = parentOf(ds, parts);
    if (!parent.IsDefined()) continue;
    const YAML::Node& cparent = parent;
    YAML::Node block = cparent[parts.back()];
    if (block && block.IsMap() && block.size() == 0) parent.remove(parts.back());
  }
}

namespace {

// "auto" at `rel` (a path under the deepspeed block): the value it becomes, "" for the key's
// default (or what the batch triangle derives), or nullopt when nothing determines it.
std::optional<std::string> autoValue(const std::string& rel, const YAML::Node& ds,
                                     const AutoInputs& in) {
  const int64_t w = in.width;
  if (rel == "train_batch_size" || rel == "train_micro_batch_size_per_gpu" ||
      rel == "gradient_accumulation_steps" || rel == "optimizer.params.lr" ||
      rel == "optimizer.params.betas" || rel == "optimizer.params.eps" ||
      rel == "optimizer.params.weight_decay" || rel == "scheduler.params.warmup_min_lr")
    return std::string();
  if (rel == "fp16.enabled" || rel == "bf16.enabled" || rel == "bfloat16.enabled")
    return std::string("false");
  if (rel == "scheduler.params.warmup_max_lr") {
    const YAML::Node& c = ds;
    YAML::Node lr =
        c["optimizer"] && c["optimizer"]["params"] ? c["optimizer"]["params"]["lr"] : YAML::Node();
    if (lr && lr.IsScalar() && lr.Scalar() != "auto") return lr.Scalar();
    return std::string("0.001");
  }
  if (rel == "scheduler.params.warmup_num_steps") return std::string("0");
  // Hugging Face's Trainer fills it from max_grad_norm, whose default is 1.0.
  if (rel == "gradient_clipping") return std::string("1.0");
  if (rel == "scheduler.params.total_num_steps")
    return std::to_string(std::max<int64_t>(1, in.steps));
  if (rel == "zero_optimization.reduce_bucket_size") return std::to_string(w * w);
  if (rel == "zero_optimization.stage3_prefetch_bucket_size" ||
      rel == "zero_optimization.prefetch_bucket_size")
    return std::to_string(int64_t(0.9 * double(w) * double(w)));
  if (rel == "zero_optimization.stage3_param_persistence_threshold" ||
      rel == "zero_optimization.param_persistence_threshold")
    return std::to_string(10 * w);
  return std::nullopt;
}

void walkAuto(YAML::Node node, const std::string& rel, YAML::Node ds, const std::string& prefix,
              const ReadContext& ctx, const AutoInputs& in, std::vector<std::string>& errors,
              std::map<std::string, std::string>& resolved) {
  if (!node.IsMap()) return;
  std::vector<std::string> keys;
  for (auto it = node.begin(); it != node.end(); ++it) keys.push_back(it->first.as<std::string>());
  for (const auto& key : keys) {
    const YAML::Node& c = node;
    YAML::Node value = c[key];
    const std::string sub = rel.empty() ? key : rel + "." + key;
    if (value.IsMap()) {
      walkAuto(value, sub, ds, prefix, ctx, in, errors, resolved);
      continue;
    }
    if (!value.IsScalar() || value.Scalar() != "auto") continue;
    const std::string path = prefix + "." + sub;
    auto to = autoValue(sub, ds, in);
    if (!to) {
      std::string why =
          "\"auto\" is filled in by Hugging Face's Trainer; nothing in a dsrun plan "
          "determines this key: give a value";
      errors.push_back(positionOf(ctx, value, path) + path + ": " + why);
      node[key] = YAML::Node(YAML::NodeType::Null);  // reported once, then read as absent
      continue;
    }
    resolved[path] = *to;
    if (to->empty()) node[key] = YAML::Node(YAML::NodeType::Null);
    else node[key] = YAML::Load(*to);
  }
}

}  // namespace

void resolveAuto(YAML::Node ds, const std::string& prefix, const ReadContext& ctx,
                 const AutoInputs& in, std::vector<std::string>& errors,
                 std::map<std::string, std::string>& resolved) {
  if (!ds || !ds.IsMap()) return;
  walkAuto(ds, "", ds, prefix, ctx, in, errors, resolved);
}

}  // namespace ds::runtime
