// Plan: the typed training plan of DESIGN §4.7 (model, data, train) plus the DeepSpeed config
// block (DsConfig: ds_config.json's keys with DeepSpeed's documented defaults). Plain data: it is
// produced and validated by loadPlan() (plan_loader.h) and never re-validated by consumers.
// Invariant after loadPlan: the batch triangle holds (train = micro * gas * world), all ranges ok.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runtime/config/parallel_grid.h"
#include "runtime/model/model.h"
#include "zero/zero_engine.h"

namespace ds::runtime {

// data: {synthetic: {...}} or {shards: glob, val: glob}.
struct DataPlan {
  std::string kind = "synthetic";  // "synthetic" | "shards"
  std::string shards;              // glob of llm.c token shards (kind == shards)
  std::string val;                 // glob of validation shards; empty: no eval data
  // synthetic: a random sparse first-order Markov chain (data/synthetic_corpus.h).
  uint64_t syntheticSeed = 1234;
  int64_t syntheticTokens = 1 << 20;     // training stream length
  int64_t syntheticValTokens = 1 << 16;  // validation stream length
  int syntheticBranching = 4;            // successors per state
};

struct TrainPlan {
  int64_t steps = 200;     // optimizer steps
  int64_t evalEvery = 0;   // 0: no periodic eval (still evaluated at the end if val exists)
  int64_t evalSteps = 8;   // global micro-batches per eval (when evalTokens is 0)
  int64_t evalTokens = 0;  // validation tokens per eval (0: evalSteps batches); capped by
                           // the validation set, never wrapping
  std::string weightDecayOn = "matrices";  // "matrices" (params of 2+ dims) | "all"
  std::string checkpointDir;               // empty: no checkpoints
  int64_t checkpointEvery = 0;             // 0: only at the end (when checkpointDir is set)
  uint64_t seed = 1234;                    // init + data order
  int64_t logEvery = 0;                    // step-line cadence; 0 means deepspeed.steps_per_print
  // The rank's device (runtime/device/device_select.h, docs/gpu.md).
  std::string device = "auto";  // train.device: "auto" (cuda:<LOCAL_RANK> if any) | "cpu" | "cuda"
  bool deviceSharing = false;   // train.device_sharing: more local ranks than GPUs may share them
  bool tf32 = false;            // train.tf32: fp32 matrix products may use TF32 on the GPU
  // train.memory_limit_mb: host memory one rank may use (MiB, 0 = no limit but the machine's
  // MemAvailable); a plan whose states + buffers + activations exceed it is refused before the
  // first step (runtime/engine/memory_fit.h).
  int64_t memoryLimitMb = 0;
  int threads = 0;  // train.threads: CPU compute threads per rank; 0 = auto (thread_policy.h)
};

// fp16 block; loss_scale 0 = dynamic (reference/zero.md §5: documented defaults applied).
struct Fp16Config {
  bool enabled = false;
  double lossScale = 0;
  int initialScalePower = 16;
  int64_t lossScaleWindow = 1000;
  int hysteresis = 2;
  bool consecutiveHysteresis = false;
  double minLossScale = 1;
};

// scheduler: {type, params}. Unused fields keep DeepSpeed's defaults (optim/lr_schedule.h).
struct SchedulerConfig {
  std::string type;  // "" (constant lr) | WarmupLR | WarmupDecayLR | WarmupCosineLR
  double warmupMinLr = 0, warmupMaxLr = 0.001;
  int64_t warmupNumSteps = 1000;
  std::string warmupType = "log";  // log | linear
  int64_t totalNumSteps = 0;       // WarmupDecayLR, WarmupCosineLR (required there)
  double warmupMinRatio = 0, cosMinRatio = 0.0001;  // WarmupCosineLR
};

// tensorboard / csv_monitor blocks.
struct MonitorConfig {
  bool enabled = false;
  std::string outputPath;  // "" = DeepSpeed's default (see monitor/)
  std::string jobName = "DeepSpeedJobName";
};

struct DsConfig {
  // Batch triangle, resolved (never 0 after loadPlan).
  int64_t trainBatchSize = 0, microBatchPerGpu = 0, gradientAccumulationSteps = 0;
  zero::OptimizerOptions optimizer;  // type + params (lr, betas, eps, weight_decay, ...)
  SchedulerConfig scheduler;
  double gradientClipping = 0;  // 0: off
  Fp16Config fp16;
  bool bf16 = false;
  zero::ZeroOptions zero;                // zero_optimization, offload blocks; compute from bf16
  bool activationCheckpointing = false;  // activation_checkpointing.enabled (our switch)
  MonitorConfig tensorboard, csvMonitor;
  int64_t stepsPerPrint = 10;
  bool wallClockBreakdown = false;
  std::string commBackend;  // "" = the launcher's/default choice | gloo | mpi | nccl
  zero::AioOptions aio;     // aio block (copied into both offload blocks)
  // Effective key path -> the key as written, where an alias or legacy form set it
  // ("deepspeed.bf16.enabled" -> "bfloat16.enabled").
  std::map<std::string, std::string> aliasOf;
};

struct Plan {
  ModelConfig model;  // kind gpt2|mlp; compute/activationCheckpointing copied from deepspeed
  // model.gpt.init_from: an llm.c gpt2_*.bin whose weights start a fresh run (not a resume); its
  // header must describe model (checked by the Trainer). Resolved against the plan's directory.
  std::string initFrom;
  DataPlan data;
  TrainPlan train;
  DsConfig deepspeed;
  ParallelPlan parallel;  // parallel: {pipeline, tensor} (parallel_grid.h)
  int worldSize = 1;      // the job's ranks (data x pipeline x tensor)
  // The data-parallel ranks the batch triangle was resolved for: worldSize / (pipeline x tensor)
  // (DeepSpeed: train_batch_size = micro x gas x data-parallel size).
  int dataParallel() const { return worldSize / (parallel.pipeline * parallel.tensor); }
  std::string source;        // file path, or "<built-in default plan>"
  std::string dsConfigJson;  // the effective deepspeed block as JSON (for checkpoint manifests)
  // Where each key's value came from, for `dsrt check` (effective_config.h): key path ->
  // {"plan" | "ds_config" | "--set" | "auto", the value as written} for every key given; keys
  // not listed have their default.
  std::map<std::string, std::array<std::string, 2>> origins;
  // DeepSpeed keys accepted without effect: (key path, value as written, why).
  std::vector<std::array<std::string, 3>> noEffectKeys;

  int64_t logEvery() const { return train.logEvery > 0 ? train.logEvery : deepspeed.stepsPerPrint; }
  int64_t tokensPerStep() const;  // train_batch_size * seq_len (seq_len = model.seqLen)
};

}  // namespace ds::runtime
