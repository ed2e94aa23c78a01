// Trainer construction and the step loop (see trainer.h). Checkpoint save/resume live in
// trainer_checkpoint.cc.
#include "runtime/engine/trainer.h"

#include "runtime/tensor/tensor_knobs.h"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>

#include <fmt/format.h>

#include "comm/compressed_allreduce.h"
#include "comm/process_group.h"
#include "core/error.h"
#include "core/log.h"
#include "core/safe_file.h"
#include "runtime/engine/device_engine.h"
#include "runtime/engine/init_from.h"
#include "runtime/engine/memory_fit.h"
#include "runtime/engine/pipeline_run.h"
#include "runtime/engine/preflight.h"
#include "runtime/engine/run_report.h"
#include "runtime/engine/tensor_run.h"
#include "runtime/engine/train_semantics.h"
#include "runtime/engine/training_device.h"
#include "runtime/model/gpt2.h"
#include "runtime/model/ops_model.h"
#include "runtime/monitor/progress_bar.h"
#include "runtime/monitor/step_line.h"
#include "runtime/tensor/kept_scratch.h"
#include "runtime/tensor/thread_policy.h"
#include "runtime/tensor/threads.h"
#include "zero/zero_engine.h"

namespace ds::runtime {

namespace {

using Clock = std::chrono::steady_clock;

size_t numelOf(const std::vector<zero::ParamInfo>& params) {
  size_t total = 0;
  for (const zero::ParamInfo& param : params) total += param.numel;
  return total;
}

double msSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// The model and ZeroEngine compute dtype before the device is known. fp16 starts emulated (fp32
// kernels reading fp16-rounded weights, gradients rounded to fp16 so they overflow where fp16's
// would, DeepSpeed's dynamic loss scaler: fp16_hooks.h; docs/plan.md "fp16 on CPU") and becomes
// native on a GPU (fp16Native below; docs/gpu.md "Precision").
DType computeDtype(const Plan& p) { return p.deepspeed.bf16 ? DType::kBF16 : DType::kF32; }

// Whether fp16 mode computes in fp16 on `ops` (DS_FP16_COMPUTE: auto = native on a device).
bool fp16Native(const Plan& plan, const Ops* ops) {
  const auto choice = knobChoice(knobs::kFp16Compute);
  const std::string mode = choice && !choice->empty() ? *choice : "auto";
  const bool device = ops != nullptr && ops->onDevice();
  if (mode == "native" && !device)
    throw ConfigError(fmt::format(
        "{}: DS_FP16_COMPUTE=native needs a GPU ({}); the CPU computes fp16 emulated "
        "(DS_FP16_COMPUTE=emulated or auto)",
        plan.source, ops != nullptr ? ops->name() : std::string("this rank trains on the CPU")));
  return device && mode != "emulated";
}

// ZeRO stage 3 on the host keeps GPT-2's tied wte split by vocabulary rows over the
// data-parallel group instead of gathering it (gpt2_data_vocab.h, issue 15 item 3) where the
// host stage can: fp32 parameters in memory. ZeRO++ composes with it (issue 18): qwZ, hpZ and
// qgZ leave the split wte out of their quantized gathers, host partitions and quantized
// reduce-scatters and apply to every other parameter; under MiCS the split runs over the shard
// group (vocabSplitSize), whose partition is the one the stage keeps. Elsewhere (bf16/fp16,
// offload_param nvme, a device, tensor or pipeline parallelism, one rank, MiCS shards of one
// rank, DS_ZERO3_VOCAB_SPLIT=0) wte is gathered whole as before.
bool vocabSplitApplies(const Plan& plan, const ModelConfig& mc, bool device, int world) {
  const zero::ZeroOptions& z = plan.deepspeed.zero;
  return !device && world > 1 && z.stage == 3 && mc.kind == "gpt2" && mc.compute == DType::kF32 &&
         !plan.deepspeed.fp16.enabled && !plan.deepspeed.bf16 && plan.parallel.pipeline <= 1 &&
         plan.parallel.tensor <= 1 && z.offloadParam.device != "nvme" && z.micsShardSize != 1 &&
         knobBoolOrDefault(knobs::kZero3VocabSplit);
}

// ZeRO stage 2 on the host takes GPT-2's tied wte gradient by rows (Gpt2Model::
// giveTiedGradByRows; zero::FlatPartitionedStage reduces each chunk as a bucket) so that no rank
// holds it whole through the backward (issue 15 item 2). Not on a device (the device engine and
// the mirror's model have their own gradient buffers), not with tensor or pipeline parallelism,
// not with fp16 (Fp16Hooks rounds each block's gradients to fp16 in ParamTable::grad, which is
// how a gradient past fp16's range becomes the inf that skips the step).
bool gradByRowsApplies(const Plan& plan, bool device) {
  return !device && plan.deepspeed.zero.stage == 2 && !plan.deepspeed.fp16.enabled &&
         plan.parallel.pipeline <= 1 && plan.parallel.tensor <= 1 &&
         knobBoolOrDefault(knobs::kZero2GradByRows);
}

// The ranks wte is split over: the whole data-parallel group, or MiCS's shard group of
// mics_shard_size consecutive ranks (zero_engine.cc's setUpMics; a size that does not divide
// the world is refused there, naming the key, so the whole group is used here and the engine
// reports it).
int vocabSplitSize(const zero::ZeroOptions& z, int world) {
  const int shard = z.micsShardSize;
  return shard > 1 && shard < world && world % shard == 0 ? shard : world;
}

int dataVocab(const ModelConfig& m) {
  return m.kind == "mlp" && !m.sizes.empty() ? m.sizes.front() : m.vocabSize;
}

}  // namespace

Trainer::Trainer(Plan plan, comm::ProcessGroup* group, TrainerOptions opts)
    : plan_(std::move(plan)), group_(group), opts_(std::move(opts)) {
  if (group_) {
    rank_ = group_->rank();
    world_ = group_->size();
  }
  if (plan_.worldSize != world_)
    throw ConfigError(fmt::format(
        "{}: the batch triangle was resolved for world size {} but this job has {} ranks",
        plan_.source, plan_.worldSize, world_));
  if (plan_.model.seqLen <= 0)
    throw ConfigError(
        fmt::format("{}: model.seq_len must be > 0 (got {})", plan_.source, plan_.model.seqLen));
  // Before anything is allocated or written: a run that cannot keep its results stops here.
  checkOutputsWritable(plan_, opts_.summaryPath, rank_);
  ModelConfig mc = plan_.model;
  mc.compute = computeDtype(plan_);
  mc.activationCheckpointing = plan_.deepspeed.activationCheckpointing;
  if (opts_.ops != nullptr) {
    ops_ = opts_.ops;
    logLine(fmt::format("device: {} (given by the caller)", ops_->name()));
  } else {
    TrainingDevice device = openTrainingDevice(plan_, rank_, opts_.localRank, opts_.localSize);
    ownedOps_ = std::move(device.ops);
    ops_ = ownedOps_.get();
    summary_.setDevice(device.info);
    logLine(fmt::format("device: {}; {}", device.why, device.info.summary()));
  }
  checkPipelineTrainer(plan_, ops_ != nullptr);  // before anything is allocated
  checkTensorTrainer(plan_, ops_ != nullptr);
  if (auto tp = appliedThreadPolicy()) {  // dsrt train applied it (train_command.cc)
    summary_.threads = tp->threads;
    summary_.threadPolicy = describeThreadPolicy(*tp);
    const auto from = knobString(knobs::kBlasCoreFrom);
    summary_.threadPolicy +=
        fmt::format("; OpenBLAS core {}{}", blasCoreName(),
                    from ? fmt::format(" (OPENBLAS_CORETYPE set by dsrt: it had picked {})", *from)
                         : std::string());
    logLine("cpu " + summary_.threadPolicy);
  }
  const bool fp16 = plan_.deepspeed.fp16.enabled && !plan_.deepspeed.bf16;
  const bool fp16NativeCompute = fp16 && fp16Native(plan_, ops_);
  if (fp16NativeCompute) mc.compute = DType::kF16;
  if (fp16)
    logLine(fp16NativeCompute ? "fp16: native (fp16 weights and activations, fp32 accumulation)"
                              : "fp16: emulated (fp32 kernels on fp16-rounded weights)");
  if (plan_.parallel.tensor > 1) {  // this rank's shard; the whole model (validated) for init
    canonicalModel_ = makeModel(mc);
    tensor_ = std::make_unique<TensorRun>(plan_, canonicalModel_->params(), group_);
    model_ = std::make_unique<Gpt2Model>(mc, tensor_->modelTensor());
    tensor_->setLocalParams(model_->params());
  } else if (vocabSplitApplies(plan_, mc, ops_ != nullptr, world_)) {
    makeModel(mc);  // validates the shape (ConfigError naming the key)
    const int ranks = vocabSplitSize(plan_.deepspeed.zero, world_);
    DataVocab dv{group_, rank_, world_};
    if (ranks < world_) {  // MiCS: this rank's shard group (collective over the whole group)
      for (int first = 0; first < world_; first += ranks) {
        std::vector<int> members;
        for (int member = first; member < first + ranks; ++member) members.push_back(member);
        if (auto sub = group_->newSubgroup(members)) vocabGroup_ = std::move(sub);
      }
      dv = DataVocab{vocabGroup_.get(), vocabGroup_->rank(), vocabGroup_->size()};
    }
    model_ = std::make_unique<Gpt2Model>(mc, dv);
    const zero::ZeroOptions& z = plan_.deepspeed.zero;
    const bool zeropp = z.quantizedWeights || z.quantizedGradients || z.hpzPartitionSize > 1;
    logLine(fmt::format(
        "zero stage 3: wte split by vocabulary rows over the {} {} (embedding and LM head "
        "vocabulary-parallel; never gathered whole{}; DS_ZERO3_VOCAB_SPLIT=0 gathers it)",
        ranks, ranks < world_ ? "ranks of this MiCS shard group" : "data-parallel ranks",
        zeropp ? "; ZeRO++ quantizes and partitions the other parameters" : ""));
  } else {
    model_ = ops_ ? makeModel(mc, *ops_) : makeModel(mc);
    auto* gpt = dynamic_cast<Gpt2Model*>(model_.get());
    if (gpt && gradByRowsApplies(plan_, ops_ != nullptr) && gpt->giveTiedGradByRows())
      logLine(
          "zero stage 2: wte's gradient reduced by chunks of rows at the embedding's backward "
          "(never held whole; DS_ZERO2_GRAD_BY_ROWS=0 holds it)");
  }

  zero::ZeroOptions z = plan_.deepspeed.zero;
  z.compute = mc.compute;
  DecayChoice decay = applyDecayChoice(model_->params(), plan_);
  logLine(decay.line);
  if (const std::string line = compressionLine(plan_); !line.empty()) logLine(line);
  if (ops_ && fp16 && !DeviceEngine::handles(z, plan_.deepspeed.optimizer))
    throw ConfigError(fmt::format(
        "{}: fp16.enabled on {} with {}: fp16 on a device runs on the device engine only (ZeRO "
        "stages 0-3 without offload, Adam/AdamW/SGD); unset {}, use bf16.enabled, or "
        "train.device: cpu",
        plan_.source, ops_->name(),
        z.offloadOptimizer.enabled() ? "zero_optimization.offload_optimizer"
        : z.offloadParam.enabled()   ? "zero_optimization.offload_param"
                                     : "optimizer.type " + plan_.deepspeed.optimizer.type,
        z.offloadOptimizer.enabled() ? "zero_optimization.offload_optimizer"
        : z.offloadParam.enabled()   ? "zero_optimization.offload_param"
                                     : "optimizer.type"));
  // On a device, stages 0-3 without offload keep everything there (DeviceEngine, stage 3 only
  // this rank's partition; a backend without device buffers, gloo or mpi, stages them through
  // pinned host memory in comm); offload runs the host ZeroEngine with a DeviceMirror that moves
  // parameters and gradients per block.
  // The memory-fit check's host share: the local ranks, or 0 where the states live on a device.
  const int fitLocalSize = ops_ ? 0 : opts_.localSize;
  if (ops_ && DeviceEngine::handles(z, plan_.deepspeed.optimizer)) {
    const size_t numel = model_->numParamsTotal();
    try {
      eng_ = std::make_unique<DeviceEngine>(*ops_, std::move(decay.params), group_, z,
                                            plan_.deepspeed.optimizer);
    } catch (const OutOfMemoryError& e) {
      throw OutOfMemoryError(fmt::format(
          "{}\nrank {}: the device engine needs, for {} parameters at ZeRO stage {} ({}): "
          "parameters {:.1f} MiB, gradients {:.1f} MiB, optimizer states and master up to "
          "{:.1f} MiB, before activations; use a higher ZeRO stage, more ranks, or offload",
          e.what(), rank_, numel, z.stage, dtypeName(mc.compute),
          double(numel * dtypeSize(mc.compute)) / 1048576.0, double(numel * 4) / 1048576.0,
          double(numel * 12) / 1048576.0));
    }
    logLine(fmt::format("device engine: ZeRO stage {} on {}{}", z.stage, ops_->name(),
                        z.stage == 3 ? " (the memory table's params, grads and optimizer states "
                                       "are this rank's partition; its buffers the gather slots, "
                                       "gradient slot and reduce buckets)"
                                     : ""));
  } else if (plan_.parallel.pipeline > 1) {  // this rank's stage over its own parameters
    // P x T: the stage's parameters are this tensor rank's shards (tensor_ built above).
    pipe_ = std::make_unique<PipelineRun>(plan_, mc, decay.params, group_, tensor_.get());
    if (opts_.testSkipTiedReduction) pipe_->testSkipTiedReduction();
    checkFormulaFit(group_, plan_, numelOf(pipe_->localParams()), pipe_->dataSize(),
                    fitLocalSize);  // before allocating
    eng_ = std::make_unique<zero::ZeroEngine>(pipe_->localParams(), pipe_->numLocalBlocks(),
                                              pipe_->dataGroup(), z, plan_.deepspeed.optimizer);
    logLine(pipe_->describe());
    if (tensor_) logLine(tensor_->describe(mc));
  } else if (tensor_) {  // the data-parallel engine over this rank's shards
    checkFormulaFit(group_, plan_, numelOf(decay.params), tensor_->dataSize(),
                    fitLocalSize);  // before allocating
    eng_ = std::make_unique<zero::ZeroEngine>(std::move(decay.params), model_->numBlocks(),
                                              tensor_->dataGroup(), z, plan_.deepspeed.optimizer);
    tensor_->bind(static_cast<zero::ZeroEngine&>(*eng_));
    logLine(tensor_->describe(mc));
  } else {
    if (!ops_)  // before allocating
      checkFormulaFit(group_, plan_, model_->numParamsTotal(), world_, opts_.localSize);
    eng_ = std::make_unique<zero::ZeroEngine>(std::move(decay.params), model_->numBlocks(), group_,
                                              z, plan_.deepspeed.optimizer);
    if (ops_)
      logLine(fmt::format("host engine + device mirror: ZeRO stage {} on the host, compute on {}",
                          z.stage, ops_->name()));
  }
  // A resume overwrites them; a fresh start takes model.gpt.init_from's weights when set. Either
  // way the engine reads only the ranges it keeps (partitioned construction, zero.Init): at stage
  // 3 no rank ever holds the full model.
  // (A pipeline stage's engine reads its parameters' ranges of the whole model's flat space.)
  // (A tensor-parallel rank's engine reads the canonical model's ranges, scattered to its shards.)
  auto setParams = [this](zero::TrainingEngine::ParamSource source) {
    if (tensor_) source = tensor_->localSource(std::move(source));
    eng_->setParamsFrom(pipe_ ? pipe_->localSource(std::move(source)) : std::move(source));
  };
  if (!plan_.initFrom.empty() && opts_.resume.empty()) {
    InitWeights weights(plan_);
    setParams(
        [&weights](size_t offset, size_t size, float* out) { weights.read(offset, size, out); });
    logLine(fmt::format("initialized from llm.c checkpoint {}", plan_.initFrom));
  } else {
    const Model* whole = canonicalModel_ ? canonicalModel_.get() : model_.get();
    setParams([m = whole, seed = plan_.train.seed](size_t offset, size_t size, float* out) {
      m->initParamRange(out, offset, size, seed);
    });
  }
  hooks_ = std::make_unique<TimedHooks>(*eng_);
  if (ops_ && dynamic_cast<zero::ZeroEngine*>(eng_.get()) != nullptr) {
    DeviceMirrorOptions mo;
    mo.windowed = z.stage == 3;  // stage 3: two blocks' parameters on the device at a time
    mo.rank = rank_;
    mirror_ = std::make_unique<DeviceMirror>(
        *ops_, model_->params(), mc.compute, *hooks_,
        [e = eng_.get()]() -> zero::ParamTable& { return e->table(); }, mo);
    if (const size_t tile =
            connectOptimizerOverlap(static_cast<zero::ZeroEngine&>(*eng_), *mirror_))
      logLine(
          fmt::format("offload overlap: the CPU optimizer runs in tiles of {} elements "
                      "(DS_OFFLOAD_OVERLAP_TILE, sub_group_size caps it), each tile's "
                      "parameters uploaded while the next updates (DS_OFFLOAD_OVERLAP=0: off)",
                      tile));
  }
  // fp16 on a device: the device engine's table is that Ops' memory (no mirror, checked above).
  if (fp16)
    fp16Hooks_ = std::make_unique<Fp16Hooks>(
        *hooks_, [e = eng_.get()]() -> zero::ParamTable& { return e->table(); },
        pipe_ ? pipe_->localParams() : model_->params(),
        pipe_ ? pipe_->numLocalBlocks() : model_->numBlocks(), ops_, !fp16NativeCompute);
  if (pipe_)
    pipe_->bind(static_cast<zero::ZeroEngine&>(*eng_),
                fp16Hooks_ ? static_cast<zero::BlockHooks&>(*fp16Hooks_) : *hooks_);

  corpora_ = openCorpora(plan_.data, dataVocab(plan_.model));
  LoaderOptions lo;
  lo.seqLen = plan_.model.seqLen;
  lo.microBatch = int(plan_.deepspeed.microBatchPerGpu);
  // Every pipeline stage of one data index reads the same micro-batches.
  // So does every tensor rank of one data index.
  const int dataRanks = pipe_ ? pipe_->dataSize() : tensor_ ? tensor_->dataSize() : world_;
  lo.rank = pipe_ ? pipe_->dataRank() : tensor_ ? tensor_->dataRank() : rank_;
  lo.world = dataRanks;
  lo.seed = plan_.train.seed;
  loader_ = std::make_unique<DataLoader>(corpora_.train, lo);
  if (corpora_.val) {
    lo.shuffle = false;
    valLoader_ = std::make_unique<DataLoader>(corpora_.val, lo);
    EvalBatches eval = evalBatches(plan_, valLoader_->batchesPerEpoch(), corpora_.val->size(),
                                   corpora_.val->name(), dataRanks);
    evalBatches_ = eval.batches;
    if (!eval.warning.empty()) logLine(fmt::format("{}: {}", plan_.source, eval.warning));
  }
  schedule_ = makeLrSchedule(plan_.deepspeed.scheduler, plan_.deepspeed.optimizer.lr);
  scaler_ = std::make_unique<LossScaler>(lossScalerOptionsFor(plan_.deepspeed.fp16));
  monitors_ = std::make_unique<MonitorSet>(plan_.deepspeed, rank_);

  summary_.worldSize = world_;
  summary_.zeroStage = z.stage;
  summary_.dtype = plan_.deepspeed.bf16 ? "bf16" : plan_.deepspeed.fp16.enabled ? "fp16" : "fp32";
  summary_.modelKind = plan_.model.kind;
  summary_.numParams =
      canonicalModel_ ? canonicalModel_->numParamsTotal() : model_->numParamsTotal();
  summary_.tokensPerStep = plan_.deepspeed.trainBatchSize * plan_.model.seqLen;
  summary_.entropyFloor = corpora_.entropyFloor;
  summary_.flopsPerToken = model_->flopsPerToken();

  if (!opts_.resume.empty()) {
    if (plan_.train.checkpointDir.empty())
      throw ConfigError(
          fmt::format("--resume {}: the plan sets no train.checkpoint.dir", opts_.resume));
    loadCheckpoint(plan_.train.checkpointDir, opts_.resume);
  }
}

Trainer::~Trainer() = default;

double Trainer::allreduceMean(double x) {
  if (!group_ || world_ == 1) return x;
  float v = float(x);
  group_->allreduce(comm::view(&v, 1))->wait();
  return double(v) / double(world_);
}

void Trainer::barrier() {
  if (group_ && world_ > 1) group_->barrier()->wait();
}

void Trainer::logLine(const std::string& line) {
  if (rank_ != 0 || !opts_.out) return;
  if (barShown_) std::fputs(progressBarClear().c_str(), opts_.out);
  barShown_ = false;
  std::fprintf(opts_.out, "%s\n", line.c_str());
  std::fflush(opts_.out);
}

void Trainer::drawProgress() {
  if (rank_ != 0 || !opts_.out || !opts_.progressBar) return;
  const double tokensPerSec = stepsPerSec_ * double(summary_.tokensPerStep);
  std::string bar = formatProgressBar(step_, plan_.train.steps, stepsPerSec_, tokensPerSec, 100);
  std::fputs(progressBarRedraw(bar).c_str(), opts_.out);
  std::fflush(opts_.out);
  barShown_ = true;
}

void Trainer::reportMemory() {
  size_t largestTotal = 0;
  const zero::MemoryReport maxima = largestOverRanks(group_, memory(), &largestTotal);
  logLine(formatMemoryTable(maxima, largestTotal, world_, ops_ ? ops_->name() : "cpu"));
  if (ops_ && mirror_)
    logLine(fmt::format(
        "device memory on {} (rank {}): parameter copies {:.1f} MiB ({}), gradients {:.1f} MiB "
        "(two blocks' slots), no optimizer state (the host engine's, above under host), "
        "activations and workspace {:.1f} MiB; pinned host staging {:.1f} MiB",
        ops_->name(), rank_, double(mirror_->valueBytes()) / 1048576.0,
        mirror_->windowed() ? "two blocks' slots" : "every parameter",
        double(mirror_->gradBytes()) / 1048576.0, double(model_->deviceBytes()) / 1048576.0,
        double(mirror_->pinnedBytes()) / 1048576.0));
  else if (ops_)
    logLine(
        fmt::format("device memory on {} (rank {}): activations and workspace {:.1f} MiB "
                    "besides the table's device column",
                    ops_->name(), rank_, double(model_->deviceBytes()) / 1048576.0));
}

zero::MemoryReport Trainer::memory() const {
  return mirror_ ? mirror_->memory(eng_->memory()) : eng_->memory();
}

void Trainer::reportOutputs() {
  for (const auto& line : formatOutputLines(plan_.train.checkpointDir, summary_.checkpointTag,
                                            monitors_->sinkLocations(), opts_.summaryPath))
    logLine(line);
}

std::vector<float> Trainer::fullParams() {
  if (pipe_ && tensor_)  // the stages' parts of the local model, then the tensor shards
    return tensor_->gatherCanonical(pipe_->fullParams(*eng_, model_->numParamsTotal()));
  if (pipe_) return pipe_->fullParams(*eng_, model_->numParamsTotal());
  if (tensor_) return tensor_->fullParams(*eng_);
  std::vector<float> flat(eng_->numel());
  eng_->getParams(flat.data());
  return flat;
}

void Trainer::checkFinite(const char* what, double loss, int64_t step, double lr) const {
  // fp16's dynamic scaler owns overflow (it skips the step and lowers the scale, and stops the
  // run at its minimum); anywhere else a loss that is not finite means the run has diverged, and
  // every later step would be NaN too. Every rank sees the same all-reduced value.
  if (std::isfinite(loss) || scaler_->dynamic()) return;
  const char* value = std::isnan(loss) ? "NaN" : loss > 0 ? "+inf" : "-inf";
  throw Error(fmt::format(
      "step {}: {} is {} ({}, lr {:.3g}): training diverged; stopped without saving a checkpoint "
      "or run summary (lower the learning rate, or set gradient_clipping)",
      step, what, value, summary_.dtype, lr));
}

StepRecord Trainer::trainStep() {
  const auto t0 = Clock::now();
  if (stepsThisRun_ == 0) runStart_ = t0;
  const int gas = int(plan_.deepspeed.gradientAccumulationSteps);
  const double scale = scaler_->scale();
  const double lr = schedule_->lrForStep(eng_->stepCount());  // skipped steps do not advance it
  StepRecord rec;
  double lossSum = 0, hookMs = 0;
  hooks_->take();
  zero::StepResult res;
  if (pipe_) rec.loss = pipelineStep(rec, res, lr, scale);
  for (int k = 0; k < gas && !pipe_; ++k) {
    loader_->next(batch_);
    eng_->beginStep(k == gas - 1);
    auto ta = Clock::now();
    lossSum += model_->forward(batch_.inputs.data(), batch_.targets.data(), batch_.B, batch_.T,
                               modelTable(), modelHooks());
    double h = hooks_->take();
    rec.fwdMs += msSince(ta) - h;
    hookMs += h;
    auto tb = Clock::now();
    // DeepSpeed scales the loss by 1/gas so the accumulated gradient is the step's mean. (A scale
    // beyond fp32's range stays inf here, so its gradients overflow and the step is skipped.)
    model_->backward(float(scale) / float(gas), modelTable(), modelHooks());
    h = hooks_->take();
    rec.bwdMs += msSince(tb) - h;
    hookMs += h;
  }
  if (!pipe_) res = eng_->step(float(lr), float(scale), float(plan_.deepspeed.gradientClipping));
  if (mirror_) mirror_->invalidate();
  try {
    scaler_->update(res.skipped);
  } catch (const Error& e) {  // fp16: overflow at the minimum scale
    throw Error(fmt::format("step {}: {}", step_ + 1, e.what()));
  }
  auto tc = Clock::now();
  if (!pipe_) rec.loss = allreduceMean(lossSum / gas);
  checkFinite("loss", rec.loss, step_ + 1, lr);
  rec.commMs += hookMs + res.commMs + msSince(tc);
  rec.optimMs = res.optimMs;
  ++step_;
  samples_ += plan_.deepspeed.trainBatchSize;
  rec.step = step_;
  rec.lr = lr;
  rec.lossScale = scale;
  rec.gradNorm = res.gradNorm;
  rec.skipped = res.skipped;
  rec.stepMs = msSince(t0);
  summary_.steps.push_back(rec);
  ++stepsThisRun_;
  const double runSec = msSince(runStart_) / 1e3;
  stepsPerSec_ = runSec > 0 ? double(stepsThisRun_) / runSec : 0;

  monitors_->write(trainEvents(samples_, rec.loss, lr, scale, rec.gradNorm));
  const bool breakdown = plan_.deepspeed.wallClockBreakdown;
  if (breakdown) {
    monitors_->write(timingEvents(samples_, rec.fwdMs, rec.bwdMs, rec.commMs, rec.optimMs));
    timers_.steps += 1;
    timers_.fwdMs += rec.fwdMs;
    timers_.bwdMs += rec.bwdMs;
    timers_.commMs += rec.commMs;
    timers_.optimMs += rec.optimMs;
  }
  if (res.skipped && !scaler_->lastMessage().empty()) logLine(scaler_->lastMessage());
  const int64_t every = plan_.logEvery();
  if (step_ == 1 || step_ == plan_.train.steps || (every > 0 && step_ % every == 0)) {
    if (breakdown && timers_.steps > 0) {
      // DeepSpeed's wall_clock_breakdown line (engine timers), per-step means since the last one.
      const double n = double(timers_.steps);
      logLine(
          fmt::format("time (ms) | forward: {:.2f} | backward: {:.2f} | backward_allreduce: "
                      "{:.2f} | step: {:.2f} (mean of {} step(s))",
                      timers_.fwdMs / n, timers_.bwdMs / n, timers_.commMs / n, timers_.optimMs / n,
                      timers_.steps));
      timers_ = {};
    }
    StepMetrics m;
    m.step = step_;
    m.totalSteps = plan_.train.steps;
    m.loss = rec.loss;
    m.lr = lr;
    m.lossScale = scale;
    m.gradNorm = rec.gradNorm;
    m.skipped = rec.skipped;
    m.stepMs = rec.stepMs;
    m.tokensPerSec = rec.stepMs > 0 ? double(summary_.tokensPerStep) / (rec.stepMs / 1e3) : 0;
    m.stepsPerSec = stepsPerSec_;
    m.etaSec = stepsPerSec_ > 0 ? double(plan_.train.steps - step_) / stepsPerSec_ : -1;
    m.fwdMs = rec.fwdMs;
    m.bwdMs = rec.bwdMs;
    m.commMs = rec.commMs;
    m.optimMs = rec.optimMs;
    m.pipelined = pipe_ != nullptr;
    logLine(formatStepLine(m));
  }
  return rec;
}

double Trainer::evaluate() {
  if (!valLoader_)
    throw ConfigError(
        fmt::format("{}: evaluation needs validation data (data.val or the "
                    "synthetic corpus's validation stream)",
                    plan_.source));
  valLoader_->reset();
  const int64_t n = evalBatches_;  // each batch once: at most the set (evalBatches)
  double sum = 0;
  Batch b;
  for (int64_t i = 0; i < n; ++i) {
    valLoader_->next(b);
    sum += pipe_ ? pipe_->evaluateBatch(b)
                 : model_->forward(b.inputs.data(), b.targets.data(), b.B, b.T, modelTable(),
                                   modelHooks());
  }
  hooks_->take();
  double loss = pipe_ ? pipe_->lastStageMean(sum / double(n)) : allreduceMean(sum / double(n));
  checkFinite("validation loss", loss, step_, schedule_->lrForStep(eng_->stepCount()));
  summary_.evals.push_back({step_, loss});
  monitors_->write({{"Train/Samples/eval_loss", loss, samples_}});
  logLine(formatEvalLine(step_, loss, corpora_.entropyFloor));
  return loss;
}

const RunSummary& Trainer::run() {
  const int64_t total = plan_.train.steps;
  const std::string& ckptDir = plan_.train.checkpointDir;
  if (rank_ == 0) {
    logLine(fmt::format(
        "dsrt train: {} ({} params, {} block(s)), {} rank(s), ZeRO stage {}, {}, "
        "global batch {} x {} tokens, {} steps from step {}",
        plan_.model.kind, summary_.numParams, model_->numBlocks(), world_, summary_.zeroStage,
        summary_.dtype, plan_.deepspeed.trainBatchSize, plan_.model.seqLen, total, step_));
  }
  reportMemory();
  if (!ops_)
    checkHostMemoryFit(group_, plan_, eng_->memory(),
                       pipe_ || tensor_ ? eng_->numel() : model_->numParamsTotal(), opts_.localSize,
                       pipe_     ? pipe_->dataSize()
                       : tensor_ ? tensor_->dataSize()
                                 : 0);
  std::string lastCkpt;
  while (step_ < total) {
    maybeFaultKill(opts_.faultKill, FaultPoint::kStep, rank_, step_ + 1);
    try {
      trainStep();
    } catch (const OutOfMemoryError& e) {  // a device allocation: say what else is held there
      throw OutOfMemoryError(fmt::format(
          "{}\nrank {} at step {}: the engine holds (MiB):\n{}\nthe model holds {:.1f} MiB of "
          "activations and workspace on the device; lower train_micro_batch_size_per_gpu, turn "
          "on activation_checkpointing, or use a higher ZeRO stage",
          e.what(), rank_, step_ + 1, eng_->memory().toString(),
          double(model_->deviceBytes()) / 1048576.0));
    }
    const auto& tp = plan_.train;
    if (tp.evalEvery > 0 && valLoader_ && step_ % tp.evalEvery == 0) evaluate();
    if (!ckptDir.empty() && tp.checkpointEvery > 0 && step_ % tp.checkpointEvery == 0)
      lastCkpt = saveCheckpoint(ckptDir);
    drawProgress();
  }
  if (valLoader_ && (summary_.evals.empty() || summary_.evals.back().step != step_)) evaluate();
  // The final checkpoint, unless this step's is already written (or nothing was trained here).
  if (!ckptDir.empty() && !summary_.steps.empty() &&
      lastCkpt != fmt::format("global_step{}", step_))
    lastCkpt = saveCheckpoint(ckptDir);
  summary_.checkpointTag = lastCkpt;
  summary_.memory = memory();
  summary_.activationBytes = model_->activationBytes();
  // The model's own workspace and what the kernels keep between calls (bf16 GEMM packing).
  summary_.workspaceBytes = model_->workspaceBytes() + keptScratchBytes();
  const zero::SwapIoTotals swapIo = zero::swapIoTotals();
  summary_.nvmeBytesRead = swapIo.bytesRead - swapIoAtStart_.bytesRead;
  summary_.nvmeBytesWritten = swapIo.bytesWritten - swapIoAtStart_.bytesWritten;
  if (auto* zeroEngine = dynamic_cast<zero::ZeroEngine*>(eng_.get());
      zeroEngine && plan_.deepspeed.optimizer.compressed()) {
    summary_.compressedBytes = zeroEngine->compressedBytesSent();
    summary_.plainAllreduceBytesPerStep =
        comm::CompressedAllreduce::plainAllreduceBytes(zeroEngine->numel(), world_);
  }
  monitors_->flush();
  if (rank_ == 0 && !summary_.steps.empty()) {
    auto t = summary_.totals();
    const auto per = [&](double ms) { return t.steps ? ms / double(t.steps) : 0; };
    const std::string compute =
        pipe_ ? fmt::format("fwd+bwd {:.1f}", per(t.fwdMs + t.bwdMs))  // 1F1B interleaves them
              : fmt::format("fwd {:.1f} bwd {:.1f}", per(t.fwdMs), per(t.bwdMs));
    logLine(
        fmt::format("done: {} steps, final loss {:.4f}, {:.0f} tokens/s, {:.1f} GFLOP/s, "
                    "per step {:.1f} ms ({} comm {:.1f} optim {:.1f})",
                    summary_.steps.size(), summary_.steps.back().loss, t.tokensPerSec, t.gflops,
                    per(t.ms), compute, per(t.commMs), per(t.optimMs)));
  }
  writeSummary();
  reportOutputs();
  return summary_;
}

void Trainer::writeSummary() {
  if (rank_ != 0 || opts_.summaryPath.empty()) return;
  // Temp file + rename, never through a planted name (core/safe_file).
  writeFileAtomic(opts_.summaryPath, summary_.toJson() + "\n", 0644, "--summary");
}

}  // namespace ds::runtime
