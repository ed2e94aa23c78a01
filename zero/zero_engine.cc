// ZeroEngine: the facade. Builds the stage for zero_optimization.stage (ReplicatedStage,
// FlatPartitionedStage or BlockedStage) and the optimizer partition, forwards the hooks, and
// runs the step: finish the reduction, check the gradients, update, refresh the model params.
// Not where any stage's layout or communication lives (see stage.h and its implementations).
#include "zero/zero_engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "core/log.h"
#include "zero/blocked_stage.h"
#include "zero/bucket_queue.h"
#include "zero/compressed_optimizer.h"
#include "zero/dp_comm.h"
#include "zero/engine_trace.h"
#include "zero/flat_partitioned_stage.h"
#include "zero/grad_check.h"
#include "zero/optimizer_partition.h"
#include "zero/param_index.h"
#include "zero/replicated_stage.h"

namespace ds::zero {
namespace {

double msSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

ZeroOptions validated(ZeroOptions options) {
  validateZeroOptions(options);
  return options;
}

// A rowSharded param (param_table.h) is a stage-3 split over the group the stage partitions
// over: the whole data-parallel group, or under MiCS the shard group (the model splits it over
// the same ranks; the replicas' gradient partitions are summed like every other parameter's).
void checkRowSharded(const ParamIndex& index, const ZeroOptions& options) {
  for (size_t param = 0; param < index.count(); ++param)
    if (index.param(param).rowSharded && options.stage != 3)
      throw InternalError(fmt::format(
          "zero: parameter '{}' is split by rows (vocabulary-parallel), which only ZeRO stage 3 "
          "keeps (stage {})",
          index.param(param).name, options.stage));
}

std::unique_ptr<Stage> makeStage(const StageContext& ctx) {
  switch (ctx.options.stage) {
    case 0: return std::make_unique<ReplicatedStage>(ctx);
    case 1:
    case 2: return std::make_unique<FlatPartitionedStage>(ctx);
    default: return std::make_unique<BlockedStage>(ctx);
  }
}

// OneBitAdam / ZeroOneAdam / OneBitLamb keep Adam's states (fp32, exp_avg, exp_avg_sq); the Adams
// take their plain steps as AdamW (DeepSpeed's onebit optimizers decay decoupled: update += wd *
// p); OneBitLamb runs every step itself.
OptimizerOptions partitionOptions(OptimizerOptions options) {
  if (options.compressed()) {
    options.type = "AdamW";
    options.adamwMode = true;
  }
  return options;
}

void checkCompressed(const OptimizerOptions& opt, const ZeroOptions& zero) {
  if (!opt.compressed()) return;
  if (zero.stage != 0)
    throw ConfigError(
        fmt::format("optimizer.type {}: needs zero_optimization.stage 0 (stage is "
                    "{}), as in DeepSpeed",
                    opt.type, zero.stage));
  if (zero.offloadOptimizer.enabled())
    throw ConfigError("optimizer.type " + opt.type +
                      ": zero_optimization.offload_optimizer is not supported");
  if (zero.compute == DType::kBF16)
    throw ConfigError("optimizer.type " + opt.type +
                      ": bf16.enabled is not supported (DeepSpeed runs it in fp16 or fp32)");
}

// The local runs of the optimizer partition that weight decay applies to: the parts of each
// local range lying in a parameter with ParamInfo::decay, merged where adjacent.
std::vector<OptimizerPartition::Run> decayRuns(const ParamIndex& index,
                                               const std::vector<LocalRange>& ranges) {
  std::vector<OptimizerPartition::Run> runs;
  for (const auto& range : ranges) {
    const size_t flatEnd = range.flatOffset + range.size;
    for (size_t flat = range.flatOffset; flat < flatEnd;) {
      const size_t param = index.paramAt(flat);
      const size_t next = std::min(flatEnd, index.offset(param) + index.param(param).numel);
      if (index.param(param).decay) {
        const size_t begin = range.localOffset + (flat - range.flatOffset);
        const size_t end = begin + (next - flat);
        if (!runs.empty() && runs.back().end == begin) runs.back().end = end;
        else runs.push_back({begin, end});
      }
      flat = next;
    }
  }
  std::sort(runs.begin(), runs.end(),
            [](const auto& lhs, const auto& rhs) { return lhs.begin < rhs.begin; });
  return runs;
}

}  // namespace

// The engine's state; members are declared in construction order (the stage refers to all
// before it, the optimizer may alias the stage's fp32 params).
struct ZeroEngine::Impl {
  Impl(std::vector<ParamInfo> params, int numBlocks, comm::ProcessGroup* group,
       ZeroOptions zeroOptions, OptimizerOptions optimizerOptions)
      : options(validated(std::move(zeroOptions))),
        index(std::move(params), numBlocks),
        comm(group),
        buckets(tracer, options.overlapComm) {
    checkCompressed(optimizerOptions, options);
    table.value.assign(index.count(), nullptr);
    table.value16.assign(index.count(), nullptr);
    table.grad.assign(index.count(), nullptr);
    setUpMics();
    checkRowSharded(index, options);
    stage = makeStage({index, options, partitionComm(), table, buckets, tracer});
    // The fp32 master aliases the stage's host fp32 params unless it lives on disk: cpu offload
    // keeps it in host memory either way, and a second copy would only raise the RSS.
    float* alias = options.offloadOptimizer.device == "nvme" ? nullptr : stage->masterAlias();
    optimizer = std::make_unique<OptimizerPartition>(
        stage->localSize(), partitionOptions(optimizerOptions), options.offloadOptimizer,
        options.subGroupSize, alias, comm.rank());
    optimizer->setDecayRuns(decayRuns(index, stage->ranges()));
    std::vector<OptimizerPartition::Segment> segments;  // every parameter whole (stage 0)
    for (size_t param = 0; param < index.count(); ++param)
      segments.push_back({index.offset(param), index.param(param).numel, index.param(param).decay});
    if (optimizerOptions.compressed()) {
      replicated = dynamic_cast<ReplicatedStage*>(stage.get());
      DS_CHECK(replicated != nullptr && stage->localSize() == index.numel());
      compressed = makeCompressedOptimizer(optimizerOptions, group, segments,
                                           decayRuns(index, stage->ranges()));
    }
    if (optimizerOptions.type == "Lamb") {
      // The trust ratio is per parameter: only stage 0 holds every parameter whole.
      if (options.stage != 0)
        throw ConfigError("optimizer.type Lamb: needs zero_optimization.stage 0 (stage is " +
                          std::to_string(options.stage) + ")");
      optimizer->setSegments(std::move(segments));
    }
  }

  // MiCS (mics_shard_size s < world): the stage partitions over groups of s consecutive ranks
  // (micsShard) and the gradient partitions are summed across the groups (micsReplica).
  void setUpMics() {
    const int shard = options.micsShardSize;
    if (shard <= 0 || options.stage != 3 || comm.single() || shard == comm.world()) return;
    if (shard > comm.world() || comm.world() % shard != 0)
      throw ConfigError(fmt::format(
          "zero_optimization.mics_shard_size {} does not divide the data-parallel world of {} "
          "ranks (use the ranks per host, or a divisor of {})",
          shard, comm.world(), comm.world()));
    micsShard = comm.consecutiveSubgroup(shard);
    micsReplica = comm.stridedSubgroup(shard);
    mics = true;
  }
  DpComm& partitionComm() { return mics ? micsShard : comm; }

  void writeMasterFrom(const ParamSource& source);
  void loadModelFromMaster();
  // summedOver: how many ranks' gradients the reduced ones sum (world; 1 when kept local).
  void update(StepResult& result, const GradCheck& check, float learningRate, float lossScale,
              float clipNorm, int summedOver);
  void announceLocal(size_t offset, size_t count);
  // normScope's skipped flat range in the optimizer's local index space (sorted, disjoint).
  std::vector<std::pair<size_t, size_t>> localSkip() const;

  ZeroOptions options;
  ParamsReady ready;    // setParamsReady's listener (empty: none)
  NormScope normScope;  // setNormScope's (empty: this engine's group only)
  ParamIndex index;
  DpComm comm;
  bool mics = false;
  DpComm micsShard{nullptr}, micsReplica{nullptr};
  Tracer tracer;
  ParamTable table;
  BucketQueue buckets;
  std::unique_ptr<Stage> stage;
  std::unique_ptr<OptimizerPartition> optimizer;
  ReplicatedStage* replicated = nullptr;            // stage 0's, for the compressed optimizers
  std::unique_ptr<CompressedOptimizer> compressed;  // OneBitAdam / ZeroOneAdam / OneBitLamb
  int64_t steps = 0;
  // Whether this step's gradients stay on each rank (a compressed optimizer's 1-bit step).
  bool localGradients() const { return compressed && !compressed->exactGradients(steps + 1); }
};

// The optimizer's own fp32 master (when it has one) of every local range, piece by piece.
void ZeroEngine::Impl::writeMasterFrom(const ParamSource& source) {
  if (!optimizer->masterOwned()) return;  // the master is the stage's own fp32 params
  std::vector<float> piece;
  for (const auto& range : stage->ranges())
    for (size_t done = 0; done < range.size; done += kParamSourcePiece) {
      const size_t count = std::min(kParamSourcePiece, range.size - done);
      piece.resize(count);
      source(range.flatOffset + done, count, piece.data());
      optimizer->write(0, range.localOffset + done, count, piece.data());
    }
}

// The model params of every local range from the fp32 master, then the stage's refresh.
void ZeroEngine::Impl::loadModelFromMaster() {
  for (const auto& range : stage->ranges()) {
    std::vector<float> values(range.size);
    optimizer->read(0, range.localOffset, range.size, values.data());
    stage->writeModelRange(range, values.data());
  }
  stage->refreshModelParams();
}

void ZeroEngine::Impl::update(StepResult& result, const GradCheck& check, float learningRate,
                              float lossScale, float clipNorm, int summedOver) {
  const float multiplier = gradientMultiplier(check, clipNorm, summedOver, lossScale);
  auto start = std::chrono::steady_clock::now();
  ++steps;
  ModelParamSink sink = stage->modelSink(optimizer->masterOwned());
  const Stage::ParamsFinal final = ready ? stage->paramsFinal() : Stage::ParamsFinal::kNever;
  auto afterTile = sink.afterTile;
  if (final == Stage::ParamsFinal::kPerTile)
    afterTile = [this, &sink](size_t offset, size_t count, const float* master) {
      if (sink.afterTile) sink.afterTile(offset, count, master);
      announceLocal(offset, count);
    };
  if (compressed && !compressed->plainAdam(steps)) {
    float* master = optimizer->stateData(0);
    compressed->step(steps, stage->localGrads(), multiplier, learningRate, master,
                     optimizer->stateData(1), optimizer->stateData(2));
    if (sink.out16.data) convertTo16(master, sink.out16, stage->optimizerCount());
    if (afterTile) afterTile(0, stage->optimizerCount(), master);
  } else {
    optimizer->update(stage->localGrads(), stage->optimizerCount(), multiplier, learningRate, steps,
                      sink.out16, afterTile);
  }
  if (compressed) compressed->finishStep(steps, optimizer->stateData(0));
  result.optimMs = msSince(start);
  start = std::chrono::steady_clock::now();
  stage->refreshModelParams();
  if (final == Stage::ParamsFinal::kAfterRefresh && index.numel() > 0) ready(0, index.numel());
  result.commMs += msSince(start);
}

// The flat regions of local [offset, offset + count), in the ranges' (ascending) order.
void ZeroEngine::Impl::announceLocal(size_t offset, size_t count) {
  for (const auto& range : stage->ranges()) {
    const size_t begin = std::max(offset, range.localOffset);
    const size_t end = std::min(offset + count, range.localOffset + range.size);
    if (begin < end) ready(range.flatOffset + (begin - range.localOffset), end - begin);
  }
}

std::vector<std::pair<size_t, size_t>> ZeroEngine::Impl::localSkip() const {
  std::vector<std::pair<size_t, size_t>> skips = normScope.skipRanges;
  if (normScope.skipBegin < normScope.skipEnd)
    skips.emplace_back(normScope.skipBegin, normScope.skipEnd);
  std::sort(skips.begin(), skips.end());
  std::vector<std::pair<size_t, size_t>> out;
  for (const auto& range : stage->ranges()) {
    for (const auto& [skipBegin, skipEnd] : skips) {
      const size_t begin = std::max(skipBegin, range.flatOffset);
      const size_t end = std::min(skipEnd, range.flatOffset + range.size);
      if (begin < end)
        out.emplace_back(range.localOffset + (begin - range.flatOffset),
                         range.localOffset + (end - range.flatOffset));
    }
  }
  return out;
}

void ZeroEngine::setNormScope(NormScope scope) { impl_->normScope = std::move(scope); }

ZeroEngine::ZeroEngine(std::vector<ParamInfo> params, int numBlocks, comm::ProcessGroup* group,
                       ZeroOptions zopts, OptimizerOptions oopts)
    : impl_(std::make_unique<Impl>(std::move(params), numBlocks, group, std::move(zopts),
                                   std::move(oopts))) {
  DS_LOG_DEBUG("zero",
               "ZeRO stage {} on {} rank(s), {} params ({} elements); this rank's memory:\n{}",
               impl_->options.stage, impl_->comm.world(), impl_->index.count(),
               impl_->index.numel(), memory().toString());
}

ZeroEngine::~ZeroEngine() {
  try {
    impl_->buckets.drainAll();
  } catch (const std::exception& error) {
    DS_LOG_WARN("zero", "pending collective failed at shutdown: {}", error.what());
  }
}

size_t ZeroEngine::numel() const { return impl_->index.numel(); }
ParamTable& ZeroEngine::table() { return impl_->table; }
int64_t ZeroEngine::stepCount() const { return impl_->steps; }

void ZeroEngine::setParamsFrom(const ParamSource& source) {
  impl_->buckets.drainAll();
  impl_->stage->setParams(source);
  impl_->writeMasterFrom(source);
}

void ZeroEngine::getParams(float* fullFlat) {
  impl_->buckets.drainAll();
  impl_->stage->getParams(fullFlat, *impl_->optimizer);
}

void ZeroEngine::beforeForward(int block) {
  impl_->tracer.note(TraceEvent::Kind::kBeforeForward, block);
  DS_CHECK(impl_->index.validBlock(block), "beforeForward({}) of {} blocks", block,
           impl_->index.numBlocks());
  impl_->stage->beforeForward(block);
}

void ZeroEngine::afterForward(int block) {
  impl_->tracer.note(TraceEvent::Kind::kAfterForward, block);
  impl_->stage->afterForward(block);
}

void ZeroEngine::beforeBackward(int block) {
  impl_->tracer.note(TraceEvent::Kind::kBeforeBackward, block);
  DS_CHECK(impl_->index.validBlock(block), "beforeBackward({}) of {} blocks", block,
           impl_->index.numBlocks());
  impl_->stage->beforeBackward(block);
}

void ZeroEngine::afterBackward(int block) {
  impl_->tracer.note(TraceEvent::Kind::kAfterBackward, block);
  DS_CHECK(impl_->index.validBlock(block), "afterBackward({}) of {} blocks", block,
           impl_->index.numBlocks());
  impl_->stage->afterBackward(block);
}

void ZeroEngine::beforeBackwardPart(int block, int part) {
  DS_CHECK(impl_->index.validBlock(block) && part >= 1 && part <= impl_->index.lastPart(block),
           "beforeBackwardPart({}, {}): block {} of {} declares parts 0..{}", block, part, block,
           impl_->index.numBlocks(),
           impl_->index.validBlock(block) ? impl_->index.lastPart(block) : 0);
  impl_->stage->beforeBackwardPart(block, part);
}

void ZeroEngine::beginStep(bool lastMicroStep) {
  if (impl_->compressed) impl_->replicated->setAllreduce(!impl_->localGradients());
  impl_->stage->beginMicroStep(lastMicroStep);
}

StepResult ZeroEngine::step(float learningRate, float lossScale, float clipNorm) {
  Impl& engine = *impl_;
  StepResult result;
  const auto start = std::chrono::steady_clock::now();
  engine.stage->finishReduction();
  engine.buckets.drainAll();
  if (engine.mics)  // the shard groups' partitions hold their ranks' sums: add the groups'
    waitWork(engine.micsReplica.allreduceSum(const_cast<float*>(engine.stage->localGrads()),
                                             engine.stage->optimizerCount()));
  const bool local = engine.localGradients();
  GradCheck check =
      engine.normScope.acrossStages
          ? checkGradientsAcrossStages(
                engine.stage->localGrads(), engine.stage->optimizerCount(), engine.localSkip(),
                engine.stage->gradsReplicated() && !local, engine.partitionComm(),
                engine.comm.world(), lossScale, engine.normScope.acrossStages)
          : checkGradients(engine.stage->localGrads(), engine.stage->optimizerCount(),
                           engine.stage->gradsReplicated() && !local, engine.partitionComm(),
                           engine.comm.world(), lossScale);
  if (local)  // each rank's own gradients: the norm is the ranks' RMS norm, nothing to average
    check.norm = float(std::sqrt(check.sumSquares / double(engine.comm.world())) / lossScale);
  result.commMs = msSince(start);
  result.gradNorm = check.norm;
  if (check.finite())
    engine.update(result, check, learningRate, lossScale, clipNorm,
                  local ? 1 : engine.comm.world());
  else result.skipped = true;
  engine.stage->zeroGrads();
  return result;
}

MemoryReport ZeroEngine::memory() const {
  const Impl& engine = *impl_;
  MemoryReport report;
  engine.stage->addMemory(report);
  addBytes(report, MemKind::kOptimizerStates, engine.optimizer->place(),
           engine.optimizer->stateBytes());
  addBytes(report, MemKind::kBuffers, MemPlace::kHost, engine.optimizer->bufferBytes());
  addBytes(report, MemKind::kBuffers, MemPlace::kDevice, engine.buckets.bufferBytes());
  return report;
}

void ZeroEngine::enableTrace(bool enabled) { impl_->tracer.enable(enabled); }
std::vector<TraceEvent> ZeroEngine::takeTrace() { return impl_->tracer.take(); }

PipelineState ZeroEngine::pipeline() const {
  PipelineState state;
  impl_->buckets.addPipeline(state);
  impl_->stage->addPipeline(state);  // nvme read-ahead completions are reaped: not const
  return state;
}

bool ZeroEngine::gatherIssued(size_t param) const { return impl_->stage->gatherIssued(param); }

void ZeroEngine::setParamsReady(ParamsReady ready, size_t updateTile) {
  impl_->ready = std::move(ready);
  impl_->optimizer->setUpdateTile(updateTile == 0 ? impl_->options.subGroupSize : updateTile);
}

uint64_t ZeroEngine::compressedBytesSent() const {
  return impl_->compressed ? impl_->compressed->bytesSent() : 0;
}

std::vector<ZeroEngine::ShardTensor> ZeroEngine::optimizerShard() const {
  const Impl& engine = *impl_;
  const auto& names = engine.optimizer->stateNames();
  std::vector<ShardTensor> shard;
  if (engine.mics && engine.micsReplica.rank() != 0) return shard;  // shard group 0 saves
  for (size_t state = 0; state < names.size(); ++state)
    for (const auto& range : engine.stage->ranges()) {
      ShardTensor tensor{names[state], range.flatOffset, range.size,
                         std::vector<float>(range.size)};
      engine.optimizer->read(state, range.localOffset, range.size, tensor.data.data());
      shard.push_back(std::move(tensor));
    }
  if (engine.compressed)
    for (auto& tensor : engine.compressed->extraStates()) shard.push_back(std::move(tensor));
  return shard;
}

void ZeroEngine::loadOptimizerState(
    const std::function<void(size_t, size_t, const std::string&, float*)>& readRange,
    int64_t stepCount) {
  Impl& engine = *impl_;
  engine.buckets.drainAll();
  const auto& names = engine.optimizer->stateNames();
  for (size_t state = 0; state < names.size(); ++state)
    for (const auto& range : engine.stage->ranges()) {
      std::vector<float> values(range.size);
      readRange(range.flatOffset, range.size, names[state], values.data());
      engine.optimizer->write(state, range.localOffset, range.size, values.data());
    }
  engine.steps = stepCount;
  engine.loadModelFromMaster();
  if (engine.compressed) {
    engine.compressed->loadExtraStates(readRange);
    engine.compressed->restore(stepCount, engine.optimizer->stateData(0));
  }
}

}  // namespace ds::zero
