// ds_config keys and DeepSpeed's defaults (reference/zero.md §3.1, §5, §6; docs config-json).
// Keys DeepSpeed has that change nothing here are accepted (listed in docs/plan.md); keys that
// would change behaviour we do not implement are refused when set to a non-default value.
#include "runtime/config/ds_config_schema.h"

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace ds::runtime {
namespace {

constexpr int64_t kBig = int64_t(1) << 50;

void readOptimizer(NodeReader& ds, DsConfig& c) {
  auto o = ds.child("optimizer");
  if (!o) return;
  auto& opt = c.optimizer;
  opt.type = o->getEnum("type", "AdamW", {"Adam", "AdamW", "SGD"}, true);
  auto p = o->child("params");
  if (p) {
    opt.lr = float(p->getDouble("lr", 1e-3, 0.0));
    opt.weightDecay = float(p->getDouble("weight_decay", 0.0, 0.0));
    if (opt.type == "SGD") {
      opt.momentum = float(p->getDouble("momentum", 0.0, 0.0, 1.0));
      if (p->getDouble("dampening", 0.0) != 0.0) p->fail("dampening", "only 0 is supported");
      if (p->getBool("nesterov", false)) p->fail("nesterov", "nesterov SGD is not supported");
    } else {
      auto betas = p->getDoubleList("betas", {0.9, 0.999}, 2);
      for (double b : betas)
        if (b < 0 || b >= 1) p->fail("betas", "each beta must be in [0, 1)");
      opt.beta1 = float(betas[0]);
      opt.beta2 = float(betas[1]);
      opt.eps = float(p->getDouble("eps", 1e-8, 0.0));
      opt.biasCorrection = p->getBool("bias_correction", true);
      // DeepSpeed: "Adam" is decoupled (AdamW) unless adam_w_mode is false; AdamW always is.
      opt.adamwMode = opt.type == "AdamW" || p->getBool("adam_w_mode", true);
      if (p->getBool("amsgrad", false)) p->fail("amsgrad", "amsgrad is not supported");
      p->accept("torch_adam");
    }
    p->finish();
  }
  o->finish();
}

void readScheduler(NodeReader& ds, DsConfig& c, int64_t defaultTotal) {
  auto s = ds.child("scheduler");
  if (!s) return;
  auto& sc = c.scheduler;
  sc.type = s->getEnum("type", "", {"WarmupLR", "WarmupDecayLR", "WarmupCosineLR"});
  sc.totalNumSteps = defaultTotal;
  bool explicitTotal = false;
  if (auto p = s->child("params")) {
    explicitTotal = p->has("total_num_steps");
    sc.warmupNumSteps = p->getInt("warmup_num_steps", 1000, 0);
    sc.warmupType = p->getEnum("warmup_type", "log", {"log", "linear"});
    if (sc.type != "WarmupLR") sc.totalNumSteps = p->getInt("total_num_steps", defaultTotal, 1);
    if (sc.type == "WarmupCosineLR") {
      sc.warmupMinRatio = p->getDouble("warmup_min_ratio", 0.0, 0.0, 1.0);
      sc.cosMinRatio = p->getDouble("cos_min_ratio", 0.0001, 0.0, 1.0);
    } else {
      sc.warmupMinLr = p->getDouble("warmup_min_lr", 0.0, 0.0);
      sc.warmupMaxLr = p->getDouble("warmup_max_lr", 0.001, 0.0);
    }
    if (p->getInt("last_batch_iteration", -1) != -1)
      p->fail("last_batch_iteration", "only -1 is supported (resume restores the iteration)");
    p->finish();
  }
  // Only an explicit total is held to this: one derived from train.steps may end inside the
  // warmup (a short run of a plan), and the schedule then simply never decays.
  if (sc.type == "WarmupCosineLR" && explicitTotal &&
      sc.totalNumSteps <= std::max<int64_t>(2, sc.warmupNumSteps))
    s->fail("params.total_num_steps", "WarmupCosineLR needs total_num_steps > warmup_num_steps");
  s->finish();
}

void readFp16(NodeReader& ds, DsConfig& c) {
  if (auto f = ds.child("fp16")) {
    auto& x = c.fp16;
    x.enabled = f->getBool("enabled", false);
    x.lossScale = f->getDouble("loss_scale", 0.0, 0.0);
    x.initialScalePower = int(f->getInt("initial_scale_power", 16, 0, 64));
    x.lossScaleWindow = f->getInt("loss_scale_window", 1000, 1);
    x.hysteresis = int(f->getInt("hysteresis", 2, 1, 1 << 20));
    x.consecutiveHysteresis = f->getBool("consecutive_hysteresis", false);
    x.minLossScale = f->getDouble("min_loss_scale", 1.0, 1e-30);
    f->finish();
  }
  if (auto b = ds.child("bf16")) {
    c.bf16 = b->getBool("enabled", false);
    b->finish();
  }
  if (c.bf16 && c.fp16.enabled)
    ds.fail("bf16", "bfloat16 and fp16 modes cannot be simultaneously enabled");
}

zero::OffloadOptions readOffload(NodeReader& z, const std::string& key, bool optimizer) {
  zero::OffloadOptions o;
  auto r = z.child(key);
  if (!r) return o;
  o.device = r->getEnum("device", "none", {"none", "cpu", "nvme"});
  o.nvmePath = r->getString("nvme_path", "");
  o.pinMemory = r->getBool("pin_memory", false);
  o.bufferCount = int(r->getInt("buffer_count", optimizer ? 4 : 5, 1, 1024));
  if (optimizer) {
    if (o.device == "nvme" && o.bufferCount < 3)
      r->fail("buffer_count", "nvme offload needs at least 3 buffers");
    for (const char* k : {"pipeline_read", "pipeline_write", "fast_init"}) r->getBool(k, false);
    if (r->getDouble("ratio", 1.0, 0.0, 1.0) != 1.0) r->fail("ratio", "only 1.0 is supported");
  } else {
    r->getInt("buffer_size", 100000000, 1);
    r->getInt("max_in_cpu", 1000000000, 0);
  }
  if (o.device == "nvme" && o.nvmePath.empty())
    r->fail("nvme_path", "required when device is nvme");
  r->finish();
  return o;
}

void readZero(NodeReader& ds, DsConfig& c) {
  auto z = ds.child("zero_optimization");
  if (!z) return;
  auto& zo = c.zero;
  int64_t stage = z->getInt("stage", 0, 0);
  if (stage > 3)
    z->fail("stage", "Maximum supported ZeRO stage is 3, got " + std::to_string(stage));
  zo.stage = int(stage);
  zo.reduceBucketSize = size_t(z->getInt("reduce_bucket_size", 500000000, 1, kBig));
  zo.allgatherBucketSize = size_t(z->getInt("allgather_bucket_size", 500000000, 1, kBig));
  zo.overlapComm = z->getBool("overlap_comm", zo.stage == 3);  // null: true iff stage 3
  zo.reduceScatter = z->getBool("reduce_scatter", true);
  if (!zo.reduceScatter && zo.stage == 3)
    z->fail("reduce_scatter",
            "false is supported at stages 0-2 only (stage 3 always "
            "reduce-scatters its per-parameter gradients)");
  zo.contiguousGradients = z->getBool("contiguous_gradients", true);
  if (!zo.contiguousGradients)
    z->fail("contiguous_gradients",
            "false is not supported (stages 2 and 3 always copy finished "
            "gradients into contiguous bucket buffers; use true)");
  auto alias = [&](const char* a, const char* b, int64_t dflt) {
    if (z->has(a) && z->has(b)) z->fail(b, std::string("given twice (also as ") + a + ")");
    z->accept(a);
    z->accept(b);
    return z->has(b) ? z->getInt(b, dflt, 0, kBig) : z->getInt(a, dflt, 0, kBig);
  };
  zo.prefetchBucketSize =
      size_t(alias("stage3_prefetch_bucket_size", "prefetch_bucket_size", 50000000));
  zo.paramPersistenceThreshold =
      size_t(alias("stage3_param_persistence_threshold", "param_persistence_threshold", 100000));
  zo.maxLiveParameters =
      size_t(alias("stage3_max_live_parameters", "max_live_parameters", 1000000000));
  zo.subGroupSize = size_t(z->getInt("sub_group_size", 1000000000, 1, kBig));
  zo.offloadOptimizer = readOffload(*z, "offload_optimizer", true);
  zo.offloadParam = readOffload(*z, "offload_param", false);
  if (zo.offloadParam.device != "none" && zo.stage != 3)
    z->fail("offload_param", "offload_param is only supported with ZeRO stage 3");
  if (zo.offloadOptimizer.device != "none" && zo.stage == 0)
    z->fail("offload_optimizer", "offload_optimizer needs ZeRO stage 1, 2 or 3");
  // DeepSpeed keys whose DeepSpeed default is what the engine does: another value is refused.
  if (!z->getBool("allgather_partitions", true))
    z->fail("allgather_partitions",
            "false (broadcast-based parameter gathering) is not "
            "supported; parameters are always allgathered (use true)");
  if (!z->getBool("load_from_fp32_weights", true))
    z->fail("load_from_fp32_weights",
            "false is not supported; checkpoints always restore the "
            "fp32 master weights (use true)");
  if (!z->getBool("ignore_unused_parameters", true))
    z->fail("ignore_unused_parameters",
            "false is not supported; a parameter without a gradient "
            "always counts as a zero gradient (use true)");
  // Performance-only DeepSpeed keys, accepted with no effect (docs/zero.md "Not implemented").
  for (const char* k : {"round_robin_gradients", "use_multi_rank_bucket_allreduce",
                        "memory_efficient_linear", "stage3_gather_16bit_weights_on_model_save"})
    z->getBool(k, false);
  z->getInt("stage3_max_reuse_distance", 1000000000, 0, kBig);
  z->finish();
}

MonitorConfig readMonitor(NodeReader& ds, const std::string& key) {
  MonitorConfig m;
  if (auto r = ds.child(key)) {
    m.enabled = r->getBool("enabled", false);
    m.outputPath = r->getString("output_path", "");
    m.jobName = r->getString("job_name", "DeepSpeedJobName");
    if (m.jobName.empty() || m.jobName.find('/') != std::string::npos)
      r->fail("job_name", "must be a non-empty name without '/'");
    r->finish();
  }
  return m;
}

void readActivationCheckpointing(NodeReader& ds, DsConfig& c) {
  auto a = ds.child("activation_checkpointing");
  if (!a) return;
  c.activationCheckpointing = a->getBool("enabled", false);
  for (const char* k :
       {"partition_activations", "cpu_checkpointing", "contiguous_memory_optimization",
        "synchronize_checkpoint_boundary", "profile"})
    if (a->getBool(k, false)) a->fail(k, "not supported (use activation_checkpointing.enabled)");
  a->accept("number_checkpoints");
  a->finish();
}

}  // namespace

DsConfig readDsConfig(NodeReader& ds, int64_t defaultTotalSteps) {
  DsConfig c;
  c.trainBatchSize = ds.getInt("train_batch_size", 0, 1);
  c.microBatchPerGpu = ds.getInt("train_micro_batch_size_per_gpu", 0, 1);
  c.gradientAccumulationSteps = ds.getInt("gradient_accumulation_steps", 0, 1);
  readOptimizer(ds, c);
  readScheduler(ds, c, defaultTotalSteps);
  c.gradientClipping = ds.getDouble("gradient_clipping", 0.0, 0.0);
  readFp16(ds, c);
  readZero(ds, c);
  c.zero.compute = c.bf16 ? DType::kBF16 : DType::kF32;
  readActivationCheckpointing(ds, c);
  c.tensorboard = readMonitor(ds, "tensorboard");
  c.csvMonitor = readMonitor(ds, "csv_monitor");
  c.stepsPerPrint = ds.getInt("steps_per_print", 10, 1);
  c.wallClockBreakdown = ds.getBool("wall_clock_breakdown", false);
  c.commBackend = ds.getEnum("comm_backend", "", {"", "gloo", "mpi", "nccl"});
  ds.getBool("zero_allow_untested_optimizer", false);
  ds.getBool("zero_force_ds_cpu_optimizer", true);
  if (ds.getBool("prescale_gradients", false))
    ds.fail("prescale_gradients", "not supported (gradients are averaged after reduction)");
  if (ds.getDouble("gradient_predivide_factor", 1.0) != 1.0)
    ds.fail("gradient_predivide_factor", "only 1.0 is supported");
  ds.finish();
  return c;
}

std::string dsConfigToJson(const DsConfig& c) {
  using nlohmann::json;
  auto offload = [](const zero::OffloadOptions& o) {
    return json{{"device", o.device},
                {"nvme_path", o.nvmePath},
                {"pin_memory", o.pinMemory},
                {"buffer_count", o.bufferCount}};
  };
  auto mon = [](const MonitorConfig& m) {
    return json{{"enabled", m.enabled}, {"output_path", m.outputPath}, {"job_name", m.jobName}};
  };
  const auto& o = c.optimizer;
  json params = o.type == "SGD"
                    ? json{{"lr", o.lr}, {"momentum", o.momentum}, {"weight_decay", o.weightDecay}}
                    : json{{"lr", o.lr},
                           {"betas", {o.beta1, o.beta2}},
                           {"eps", o.eps},
                           {"weight_decay", o.weightDecay},
                           {"bias_correction", o.biasCorrection},
                           {"adam_w_mode", o.adamwMode}};
  json j = {
      {"train_batch_size", c.trainBatchSize},
      {"train_micro_batch_size_per_gpu", c.microBatchPerGpu},
      {"gradient_accumulation_steps", c.gradientAccumulationSteps},
      {"optimizer", {{"type", o.type}, {"params", params}}},
      {"gradient_clipping", c.gradientClipping},
      {"fp16",
       {{"enabled", c.fp16.enabled},
        {"loss_scale", c.fp16.lossScale},
        {"initial_scale_power", c.fp16.initialScalePower},
        {"loss_scale_window", c.fp16.lossScaleWindow},
        {"hysteresis", c.fp16.hysteresis},
        {"consecutive_hysteresis", c.fp16.consecutiveHysteresis},
        {"min_loss_scale", c.fp16.minLossScale}}},
      {"bf16", {{"enabled", c.bf16}}},
      {"zero_optimization",
       {{"stage", c.zero.stage},
        {"reduce_bucket_size", c.zero.reduceBucketSize},
        {"allgather_bucket_size", c.zero.allgatherBucketSize},
        {"overlap_comm", c.zero.overlapComm},
        {"reduce_scatter", c.zero.reduceScatter},
        {"contiguous_gradients", c.zero.contiguousGradients},
        {"stage3_prefetch_bucket_size", c.zero.prefetchBucketSize},
        {"stage3_param_persistence_threshold", c.zero.paramPersistenceThreshold},
        {"stage3_max_live_parameters", c.zero.maxLiveParameters},
        {"sub_group_size", c.zero.subGroupSize},
        {"offload_optimizer", offload(c.zero.offloadOptimizer)},
        {"offload_param", offload(c.zero.offloadParam)}}},
      {"activation_checkpointing", {{"enabled", c.activationCheckpointing}}},
      {"tensorboard", mon(c.tensorboard)},
      {"csv_monitor", mon(c.csvMonitor)},
      {"steps_per_print", c.stepsPerPrint},
      {"wall_clock_breakdown", c.wallClockBreakdown},
      {"comm_backend", c.commBackend},
  };
  if (!c.scheduler.type.empty()) {
    const auto& s = c.scheduler;
    json sp = {{"warmup_num_steps", s.warmupNumSteps}, {"warmup_type", s.warmupType}};
    if (s.type == "WarmupCosineLR") {
      sp["total_num_steps"] = s.totalNumSteps;
      sp["warmup_min_ratio"] = s.warmupMinRatio;
      sp["cos_min_ratio"] = s.cosMinRatio;
    } else {
      sp["warmup_min_lr"] = s.warmupMinLr;
      sp["warmup_max_lr"] = s.warmupMaxLr;
      if (s.type == "WarmupDecayLR") sp["total_num_steps"] = s.totalNumSteps;
    }
    j["scheduler"] = {{"type", s.type}, {"params", sp}};
  }
  return j.dump(2);
}

}  // namespace ds::runtime
