// ds_config keys and DeepSpeed's defaults (reference/zero.md §3.1, §5, §6; docs config-json).
// Keys DeepSpeed has that change nothing here are accepted (listed in docs/plan.md); keys that
// would change behaviour we do not implement are refused when set to a non-default value.
#include "runtime/config/ds_config_schema.h"

#include <cctype>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "runtime/config/ds_config_keys.h"

namespace ds::runtime {
namespace {

constexpr int64_t kBig = int64_t(1) << 50;

// Rejects unknown keys; the table's keys of this block count as known (for the hints).
void finishBlock(NodeReader& r) {
  acceptRuleKeys(r);
  r.finish();
}

std::string lowered(std::string s) {
  for (auto& ch : s) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

// DeepSpeed's optimizers that dsrun does not implement (refused with the ones it has).
const std::vector<std::string> kOtherOptimizers = {"Adagrad", "Lion", "MuAdam",    "MuAdamW",
                                                   "MuSGD",   "Muon", "AdamW8bit", "Adam8bit"};
const char* const kImplemented =
    "use Adam, AdamW, Lamb, SGD, OneBitAdam, ZeroOneAdam or OneBitLamb";

// OneBitLamb's own keys (DeepSpeed's runtime/fp16/onebit/lamb.py).
void readOneBitLambParams(NodeReader& p, zero::OptimizerOptions& opt) {
  opt.freezeStep = p.getInt("freeze_step", 100000, 1);
  opt.maxCoeff = float(p.getDouble("max_coeff", 10.0, 0.0));
  opt.minCoeff = float(p.getDouble("min_coeff", 0.01, 0.0));
  if (opt.minCoeff > opt.maxCoeff) p.fail("min_coeff", "must be <= max_coeff");
  const double coeffBeta = p.getDouble("coeff_beta", 0.9, 0.0);
  if (coeffBeta >= 1.0) p.fail("coeff_beta", "must be in [0, 1)");
  opt.coeffBeta = float(coeffBeta);
  opt.factorMax = float(p.getDouble("factor_max", 4.0, 0.0));
  opt.factorMin = float(p.getDouble("factor_min", 0.5, 0.0));
  if (opt.factorMin <= 0.f) p.fail("factor_min", "must be > 0");
  if (opt.factorMin > opt.factorMax) p.fail("factor_min", "must be <= factor_max");
  const double threshold = p.getDouble("factor_threshold", 0.1, 0.0);
  if (threshold >= 1.0) p.fail("factor_threshold", "must be in [0, 1)");
  opt.factorThreshold = float(threshold);
}

// OneBitAdam / ZeroOneAdam / OneBitLamb (DeepSpeed's runtime/fp16/onebit/{adam,zoadam,lamb}.py):
// their own keys.
void readCompressedParams(NodeReader& p, zero::OptimizerOptions& opt) {
  opt.adamwMode = true;  // update += weight_decay * p: decoupled
  // DeepSpeed accepts eps_inside_sqrt here but never applies it; so do we.
  p.accept("eps_inside_sqrt");
  if (opt.type == "OneBitAdam") {
    opt.freezeStep = p.getInt("freeze_step", 100000, 1);
  } else if (opt.type == "OneBitLamb") {
    readOneBitLambParams(p, opt);
  } else {
    opt.varFreezeStep = p.getInt("var_freeze_step", 100000, 1);
    opt.varUpdateScaler = p.getInt("var_update_scaler", 16, 1);
    opt.localStepScaler = p.getInt("local_step_scaler", 32678, 1);
    opt.localStepClipper = p.getInt("local_step_clipper", 16, 1);
  }
  opt.cudaAware = p.getBool("cuda_aware", false);
  const std::string backend = p.getString("comm_backend_name", "nccl");
  if (backend == "hccl" || backend == "compressed")
    p.fail("comm_backend_name",
           "'" + backend +
               "' is not available; the compressed allreduce runs over the job's "
               "data-parallel group (nccl, mpi or gloo)");
  opt.commBackendName = p.getEnum("comm_backend_name", "nccl", {"nccl", "mpi", "gloo"});
}

void readAdamParams(NodeReader& p, zero::OptimizerOptions& opt) {
  auto betas = p.getDoubleList("betas", {0.9, 0.999}, 2);
  for (double b : betas)
    if (b < 0 || b >= 1) p.fail("betas", "each beta must be in [0, 1)");
  opt.beta1 = float(betas[0]);
  opt.beta2 = float(betas[1]);
  opt.eps = float(p.getDouble("eps", 1e-8, 0.0));
  opt.biasCorrection = p.getBool("bias_correction", true);
  if (p.getBool("amsgrad", false)) p.refuse("amsgrad", "amsgrad is not supported");
  if (opt.compressed()) return readCompressedParams(p, opt);
  if (opt.type == "Lamb") {
    opt.maxCoeff = float(p.getDouble("max_coeff", 10.0, 0.0));
    opt.minCoeff = float(p.getDouble("min_coeff", 0.01, 0.0));
    if (opt.minCoeff > opt.maxCoeff) p.fail("min_coeff", "must be <= max_coeff");
    opt.epsInsideSqrt = p.getBool("eps_inside_sqrt", false);
    return;
  }
  // DeepSpeed: "Adam" is decoupled (AdamW) unless adam_w_mode is false; AdamW always is.
  opt.adamwMode = opt.type == "AdamW" || p.getBool("adam_w_mode", true);
}

void readOptimizer(NodeReader& ds, DsConfig& c) {
  auto o = ds.child("optimizer");
  if (!o) return;
  auto& opt = c.optimizer;
  std::string type = o->getString("type", "AdamW");
  for (const auto& other : kOtherOptimizers)
    if (lowered(type) == lowered(other))
      o->fail("type", "'" + type + "' is not implemented; " + kImplemented);
  opt.type =
      o->getEnum("type", "AdamW",
                 {"Adam", "AdamW", "SGD", "Lamb", "OneBitAdam", "ZeroOneAdam", "OneBitLamb"}, true);
  auto p = o->child("params");
  if (p) {
    opt.lr = float(p->getDouble("lr", 1e-3, 0.0));
    opt.weightDecay = float(p->getDouble("weight_decay", 0.0, 0.0));
    p->accept("max_grad_norm");
    if (p->has("max_grad_norm"))  // DeepSpeed's engine refuses it the same way
      p->refuse("max_grad_norm",
                "not supported as an optimizer parameter; use the deepspeed parameter "
                "gradient_clipping");
    if (opt.type == "SGD") {
      opt.momentum = float(p->getDouble("momentum", 0.0, 0.0, 1.0));
      if (p->getDouble("dampening", 0.0) != 0.0) p->refuse("dampening", "only 0 is supported");
      if (p->getBool("nesterov", false)) p->refuse("nesterov", "nesterov SGD is not supported");
    } else {
      readAdamParams(*p, opt);
    }
    finishBlock(*p);
  }
  finishBlock(*o);
}

void readScheduler(NodeReader& ds, DsConfig& c, int64_t defaultTotal) {
  auto s = ds.child("scheduler");
  if (!s) return;
  auto& sc = c.scheduler;
  for (const char* other : {"OneCycle", "LRRangeTest"})
    if (s->getString("type", "") == other)
      s->fail("type", std::string("'") + other +
                          "' is not implemented; use WarmupLR, WarmupDecayLR or WarmupCosineLR");
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
      p->refuse("last_batch_iteration", "only -1 is supported (resume restores the iteration)");
    finishBlock(*p);
  }
  // Only an explicit total is held to this: one derived from train.steps may end inside the
  // warmup (a short run of a plan), and the schedule then simply never decays.
  if (sc.type == "WarmupCosineLR" && explicitTotal &&
      sc.totalNumSteps <= std::max<int64_t>(2, sc.warmupNumSteps))
    s->fail("params.total_num_steps", "WarmupCosineLR needs total_num_steps > warmup_num_steps");
  finishBlock(*s);
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
    finishBlock(*f);
  }
  // "bfloat16" is DeepSpeed's older name of the bf16 block.
  if (ds.has("bf16") && ds.has("bfloat16"))
    ds.refuse("bfloat16", "given twice (also as bf16; bfloat16 is its older name)");
  const char* key = ds.has("bfloat16") && !ds.has("bf16") ? "bfloat16" : "bf16";
  ds.accept("bf16");
  ds.accept("bfloat16");
  if (auto b = ds.child(key)) {
    c.bf16 = b->getBool("enabled", false);
    if (std::string(key) == "bfloat16") c.aliasOf["deepspeed.bf16.enabled"] = "bfloat16.enabled";
    finishBlock(*b);
  }
  if (c.bf16 && c.fp16.enabled)
    ds.fail(key, "bfloat16 and fp16 modes cannot be simultaneously enabled");
}

// data_types and communication_data_type: accepted where they name what the engine does.
std::string dtypeName(const std::string& text) {
  std::string t = lowered(text);
  if (t.rfind("torch.", 0) == 0) t = t.substr(6);
  if (t == "fp32" || t == "float32" || t == "float") return "fp32";
  if (t == "fp16" || t == "float16" || t == "half") return "fp16";
  if (t == "bf16" || t == "bfloat16") return "bf16";
  return "";
}

void readDataTypes(NodeReader& ds, DsConfig& c) {
  const std::string compute = c.bf16 ? "bf16" : c.fp16.enabled ? "fp16" : "fp32";
  auto check = [&](NodeReader& r, const std::string& key, const std::string& want,
                   const std::string& why) {
    std::string v = r.getString(key, "");
    if (!r.has(key)) return;
    std::string name = dtypeName(v);
    if (name.empty()) r.fail(key, "expected fp32, fp16 or bf16, got '" + v + "'");
    if (name != want) r.refuse(key, fmt::format("{} here ({}), got '{}'", why, want, v));
  };
  if (auto d = ds.child("data_types")) {
    // fp16 mode rounds the accumulated gradients to fp16 after each micro-step (fp16_hooks.h).
    check(*d, "grad_accum_dtype", compute == "fp16" ? "fp16" : "fp32",
          "gradients accumulate in the engine's gradient type");
    check(*d, "param_dtype", compute, "parameters are in the compute type of bf16/fp16.enabled");
    d->accept("buffer_dtype");  // no model buffers (no BatchNorm statistics and the like)
    finishBlock(*d);
  }
  check(ds, "communication_data_type", "fp32", "gradients are reduced in fp32");
}

// aio: the NVMe swap files' request size and queue depth (DeepSpeed's defaults when the block is
// there; dsrun's when it is not).
void readAio(NodeReader& ds, DsConfig& c) {
  auto a = ds.child("aio");
  if (!a) return;
  c.aio.blockSize = size_t(a->getInt("block_size", 1048576, 4096, int64_t(zero::kMaxIoRequest)));
  c.aio.queueDepth = int(a->getInt("queue_depth", 8, 1, 4096));
  a->getInt("intra_op_parallelism", 1, 1, 1024);  // one io_uring per file does the splitting
  a->getInt("thread_count", 1, 1, 1024);          // older name of intra_op_parallelism
  a->getBool("single_submit", false);             // requests are submitted in batches either way
  a->getBool("overlap_events", true);             // completions are reaped as they arrive
  if (a->getBool("use_gds", false))
    a->refuse("use_gds", "GPUDirect Storage is not supported (swap files go through host memory)");
  finishBlock(*a);
}

zero::OffloadOptions readOffload(NodeReader& z, const std::string& key, bool optimizer) {
  zero::OffloadOptions o;
  auto r = z.child(key);
  if (!r) return o;
  o.device = r->getEnum("device", "none", {"none", "cpu", "nvme"});
  o.nvmePath = r->getString("nvme_path", "");
  o.pinMemory = r->getBool("pin_memory", false);
  o.bufferCount = int(r->getInt("buffer_count", optimizer ? 4 : 5, 1, 1024));
  if (optimizer && o.device == "nvme" && o.bufferCount < 3)
    r->fail("buffer_count", "nvme offload needs at least 3 buffers");
  if (o.device == "nvme" && o.nvmePath.empty())
    r->fail("nvme_path", "required when device is nvme");
  finishBlock(*r);
  return o;
}

// DeepSpeed's legacy switches zero_optimization.cpu_offload (the optimizer) and
// cpu_offload_param / cpu_offload_params (the parameters), with cpu_offload_use_pin_memory.
void readLegacyOffload(NodeReader& z, DsConfig& c) {
  const bool pin = z.getBool("cpu_offload_use_pin_memory", false);
  auto legacy = [&](const char* key, const char* block, zero::OffloadOptions& o) {
    if (!z.getBool(key, false)) return;
    if (z.has(block))
      z.refuse(key,
               std::string("given twice (also as ") + block + "; " + key + " is its older form)");
    o.device = "cpu";
    o.pinMemory = pin;
    c.aliasOf[std::string("deepspeed.zero_optimization.") + block + ".device"] =
        std::string("zero_optimization.") + key;
  };
  legacy("cpu_offload", "offload_optimizer", c.zero.offloadOptimizer);
  if (z.has("cpu_offload_param") && z.has("cpu_offload_params"))
    z.refuse("cpu_offload_params", "given twice (also as cpu_offload_param)");
  legacy("cpu_offload_param", "offload_param", c.zero.offloadParam);
  legacy("cpu_offload_params", "offload_param", c.zero.offloadParam);
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
    z->refuse("reduce_scatter",
              "false is supported at stages 0-2 only (stage 3 always "
              "reduce-scatters its per-parameter gradients)");
  zo.contiguousGradients = z->getBool("contiguous_gradients", true);
  if (!zo.contiguousGradients)
    z->refuse("contiguous_gradients",
              "false is not supported (stages 2 and 3 always copy finished "
              "gradients into contiguous bucket buffers; use true)");
  auto alias = [&](const char* a, const char* b, int64_t dflt) {
    if (z->has(a) && z->has(b)) z->fail(b, std::string("given twice (also as ") + a + ")");
    z->accept(a);
    z->accept(b);
    if (z->has(b))
      c.aliasOf[std::string("deepspeed.zero_optimization.") + a] =
          std::string("zero_optimization.") + b;
    return z->has(b) ? z->getInt(b, dflt, 0, kBig) : z->getInt(a, dflt, 0, kBig);
  };
  zo.prefetchBucketSize =
      size_t(alias("stage3_prefetch_bucket_size", "prefetch_bucket_size", 50000000));
  zo.paramPersistenceThreshold =
      size_t(alias("stage3_param_persistence_threshold", "param_persistence_threshold", 100000));
  zo.maxLiveParameters =
      size_t(alias("stage3_max_live_parameters", "max_live_parameters", 1000000000));
  zo.subGroupSize = size_t(z->getInt("sub_group_size", 1000000000, 1, kBig));
  zo.quantizedWeights = z->getBool("zero_quantized_weights", false);
  zo.quantizedGradients = z->getBool("zero_quantized_gradients", false);
  zo.hpzPartitionSize = int(z->getInt("zero_hpz_partition_size", 1, 1, 1 << 20));
  zo.micsShardSize = int(z->getInt("mics_shard_size", -1, -1, 1 << 20));
  if (zo.micsShardSize == 0)
    z->refuse("mics_shard_size",
              "0 ranks per shard group: use -1 (off) or a positive number of ranks");
  zo.micsHierarchicalParamsGather = z->getBool("mics_hierarchical_params_gather", false);
  if (zo.micsShardSize > 0 && zo.stage != 3)
    z->refuse("mics_shard_size",
              "MiCS shards ZeRO stage 3 state (as in DeepSpeed); set zero_optimization.stage to 3 "
              "or this key to -1");
  if (zo.micsShardSize > 0 && zo.hpzPartitionSize > 1)
    z->refuse("mics_shard_size",
              "MiCS and zero_hpz_partition_size are two ways to keep gathers inside a host; use "
              "one (hpZ keeps the world partition and a per-host copy, MiCS partitions per group)");
  if (zo.hpzPartitionSize > 1 && zo.stage != 3)
    z->refuse("zero_hpz_partition_size",
              "ZeRO++ hierarchical partitioning is a ZeRO stage 3 feature (as in DeepSpeed); set "
              "zero_optimization.stage to 3 or this key to 1");
  for (const char* key : {"zero_quantized_weights", "zero_quantized_gradients"})
    if (z->has(key) && z->getBool(key, false) && zo.stage != 3)
      z->refuse(key,
                "ZeRO++ quantized communication is a ZeRO stage 3 feature (as in "
                "DeepSpeed); set zero_optimization.stage to 3 or this key to false");
  zo.offloadOptimizer = readOffload(*z, "offload_optimizer", true);
  zo.offloadParam = readOffload(*z, "offload_param", false);
  readLegacyOffload(*z, c);
  if (zo.offloadParam.device != "none" && zo.stage != 3)
    z->refuse(z->has("offload_param") ? "offload_param" : "cpu_offload_param",
              "offload_param is only supported with ZeRO stage 3");
  if (zo.offloadOptimizer.device != "none" && zo.stage == 0)
    z->refuse(z->has("offload_optimizer") ? "offload_optimizer" : "cpu_offload",
              "offload_optimizer needs ZeRO stage 1, 2 or 3");
  // DeepSpeed keys whose DeepSpeed default is what the engine does: another value is refused.
  if (!z->getBool("allgather_partitions", true))
    z->refuse("allgather_partitions",
              "false (broadcast-based parameter gathering) is not "
              "supported; parameters are always allgathered (use true)");
  if (!z->getBool("load_from_fp32_weights", true))
    z->refuse("load_from_fp32_weights",
              "false is not supported; checkpoints always restore the "
              "fp32 master weights (use true)");
  if (!z->getBool("ignore_unused_parameters", true))
    z->refuse("ignore_unused_parameters",
              "false is not supported; a parameter without a gradient "
              "always counts as a zero gradient (use true)");
  finishBlock(*z);
}

MonitorConfig readMonitor(NodeReader& ds, const std::string& key) {
  MonitorConfig m;
  if (auto r = ds.child(key)) {
    m.enabled = r->getBool("enabled", false);
    m.outputPath = r->getString("output_path", "");
    m.jobName = r->getString("job_name", "DeepSpeedJobName");
    if (m.jobName.empty() || m.jobName.find('/') != std::string::npos)
      r->fail("job_name", "must be a non-empty name without '/'");
    finishBlock(*r);
  }
  return m;
}

void readActivationCheckpointing(NodeReader& ds, DsConfig& c) {
  auto a = ds.child("activation_checkpointing");
  if (!a) return;
  c.activationCheckpointing = a->getBool("enabled", false);
  finishBlock(*a);
}

}  // namespace

DsConfig readDsConfig(NodeReader& ds, int64_t defaultTotalSteps, std::vector<std::string>* errors) {
  DsConfig c;
  // Each part's first error is collected (when errors is given) and the next part read, so one
  // run names the problems of every part.
  auto part = [&](auto&& read) {
    if (!errors) return read();
    try {
      read();
    } catch (const ConfigError& e) {
      errors->push_back(e.what());
    }
  };
  part([&] {
    c.trainBatchSize = ds.getInt("train_batch_size", 0, 1);
    c.microBatchPerGpu = ds.getInt("train_micro_batch_size_per_gpu", 0, 1);
    c.gradientAccumulationSteps = ds.getInt("gradient_accumulation_steps", 0, 1);
  });
  part([&] { readOptimizer(ds, c); });
  part([&] { readScheduler(ds, c, defaultTotalSteps); });
  part([&] { c.gradientClipping = ds.getDouble("gradient_clipping", 0.0, 0.0); });
  part([&] { readFp16(ds, c); });
  part([&] { readDataTypes(ds, c); });
  part([&] { readZero(ds, c); });
  part([&] { readAio(ds, c); });
  c.zero.offloadOptimizer.aio = c.zero.offloadParam.aio = c.aio;
  c.zero.compute = c.bf16 ? DType::kBF16 : DType::kF32;
  part([&] {
    if (c.optimizer.type == "Lamb" && c.zero.stage != 0)
      ds.refuse("optimizer", fmt::format("Lamb needs zero_optimization.stage 0 (stage is {}): its "
                                         "trust ratio is per parameter, and stages 1-3 split "
                                         "parameters across ranks",
                                         c.zero.stage));
    if (c.optimizer.compressed() && c.zero.stage != 0)
      ds.refuse("optimizer", fmt::format("{} needs zero_optimization.stage 0 (stage is {}), as "
                                         "in DeepSpeed: its momentum is averaged whole by a "
                                         "compressed allreduce",
                                         c.optimizer.type, c.zero.stage));
    if (c.optimizer.compressed() && c.bf16)
      ds.refuse("optimizer", c.optimizer.type +
                                 " with bf16.enabled is not supported (DeepSpeed runs it in fp16 "
                                 "or fp32)");
  });
  part([&] { readActivationCheckpointing(ds, c); });
  part([&] { c.tensorboard = readMonitor(ds, "tensorboard"); });
  part([&] { c.csvMonitor = readMonitor(ds, "csv_monitor"); });
  part([&] {
    c.stepsPerPrint = ds.getInt("steps_per_print", 10, 1);
    c.wallClockBreakdown = ds.getBool("wall_clock_breakdown", false);
    c.commBackend = ds.getEnum("comm_backend", "", {"", "gloo", "mpi", "nccl"});
  });
  part([&] { finishBlock(ds); });
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
                           {"bias_correction", o.biasCorrection}};
  if (o.type == "OneBitAdam") {
    params["freeze_step"] = o.freezeStep;
  } else if (o.type == "OneBitLamb") {
    params["freeze_step"] = o.freezeStep;
    params["max_coeff"] = o.maxCoeff;
    params["min_coeff"] = o.minCoeff;
    params["coeff_beta"] = o.coeffBeta;
    params["factor_max"] = o.factorMax;
    params["factor_min"] = o.factorMin;
    params["factor_threshold"] = o.factorThreshold;
  } else if (o.type == "ZeroOneAdam") {
    params["var_freeze_step"] = o.varFreezeStep;
    params["var_update_scaler"] = o.varUpdateScaler;
    params["local_step_scaler"] = o.localStepScaler;
    params["local_step_clipper"] = o.localStepClipper;
  }
  if (o.compressed()) {
    params["cuda_aware"] = o.cudaAware;
    params["comm_backend_name"] = o.commBackendName;
  } else if (o.type == "Lamb") {
    params["max_coeff"] = o.maxCoeff;
    params["min_coeff"] = o.minCoeff;
    params["eps_inside_sqrt"] = o.epsInsideSqrt;
  } else if (o.type != "SGD") {
    params["adam_w_mode"] = o.adamwMode;
  }
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
        {"zero_quantized_weights", c.zero.quantizedWeights},
        {"zero_quantized_gradients", c.zero.quantizedGradients},
        {"zero_hpz_partition_size", c.zero.hpzPartitionSize},
        {"mics_shard_size", c.zero.micsShardSize},
        {"mics_hierarchical_params_gather", c.zero.micsHierarchicalParamsGather},
        {"offload_optimizer", offload(c.zero.offloadOptimizer)},
        {"offload_param", offload(c.zero.offloadParam)}}},
      {"activation_checkpointing", {{"enabled", c.activationCheckpointing}}},
      {"tensorboard", mon(c.tensorboard)},
      {"csv_monitor", mon(c.csvMonitor)},
      {"steps_per_print", c.stepsPerPrint},
      {"wall_clock_breakdown", c.wallClockBreakdown},
      {"comm_backend", c.commBackend},
      {"aio", {{"block_size", c.aio.blockSize}, {"queue_depth", c.aio.queueDepth}}},
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
