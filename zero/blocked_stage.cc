// BlockedStage: stage 3's hooks, gradient buckets and parameter I/O.
#include "zero/blocked_stage.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "core/error.h"
#include "zero/bucket_queue.h"
#include "zero/bulk_ops.h"
#include "zero/dp_comm.h"
#include "zero/optimizer_partition.h"
#include "zero/param_index.h"
#include "zero/swap_space.h"
#include "zero/transient_bounds.h"

namespace ds::zero {

namespace {
// Stage 3 clamps the reduce bucket below effectiveReduceBucket's eighth of the partition: it
// reduces block by block (and backward part by part) as backward goes, so a bucket larger than a
// part's gradients only adds buffer, and takes a parameter larger than the bucket in pieces. A
// 128th of the partition, at least 512 Ki elements (the floor at 124M params and 2 ranks: 2 MiB
// in, 1 MiB out per slot) keeps the collectives large while the two slots hold 6 MiB there
// instead of 23 at a thirty-second and 70 at an eighth (issue 15 item 3).
constexpr size_t kStage3BucketDivisor = 128;
constexpr size_t kStage3BucketFloor = size_t(1) << 19;
}  // namespace

BlockedStage::BlockedStage(const StageContext& ctx)
    : ctx_(ctx),
      layout_(ctx.index.params(), ctx.comm.world()),
      store_(makeParamStore(ctx.options, ctx.comm.rank(), layout_.localSize(), ctx.tracer)),
      gatherer_(ctx, layout_, *store_, pool32_),
      transient_(ctx.table, pool32_, ctx.index.count()) {
  localSize_ = optimizerCount_ = layout_.localSize();
  for (size_t param = 0; param < ctx_.index.count(); ++param) {
    const Shard own = layout_.ownRange(param, ctx_.comm.rank());
    if (own.size)
      ranges_.push_back(
          {ctx_.index.offset(param) + own.offset, layout_.localOffset(param), own.size});
  }
  if (ctx_.options.offloadOptimizer.device == "nvme") {
    checkSwapSpace("offload_optimizer.nvme_path", ctx_.options.offloadOptimizer.nvmePath,
                   localSize_ * sizeof(float));
    gradFile_ = std::make_unique<MappedFloats>(ctx_.options.offloadOptimizer.nvmePath, localSize_,
                                               "gradient partition",
                                               "zero_optimization.offload_optimizer.nvme_path");
    gradPart_ = gradFile_->data();
  } else {
    gradMemory_.assign(localSize_, 0.f);
    gradPart_ = gradMemory_.data();
  }
  if (ctx_.options.hpzPartitionSize > 1 && !ctx_.comm.single()) {
    if (ctx_.comm.world() % ctx_.options.hpzPartitionSize != 0)
      throw ConfigError(fmt::format(
          "zero_optimization.zero_hpz_partition_size {} does not divide the data-parallel world "
          "of {} ranks (use the ranks per host, e.g. {})",
          ctx_.options.hpzPartitionSize, ctx_.comm.world(), ctx_.comm.world()));
    hpz_ = std::make_unique<DpComm>(ctx_.comm.consecutiveSubgroup(ctx_.options.hpzPartitionSize));
    gatherer_.setSecondary(hpz_.get());
  }
  bindRowSharded();
  const size_t world = size_t(ctx_.comm.world());
  bucket_ = std::min(
      effectiveReduceBucket(ctx_.options.reduceBucketSize, localSize_, localSize_ * world),
      std::max(kStage3BucketFloor, (localSize_ + kStage3BucketDivisor - 1) / kStage3BucketDivisor));
  ctx_.buckets.allocate(bucket_, (bucket_ + world - 1) / world);
  // A rowSharded param has no gathered copy and no transient gradient.
  const ParamElems full = [this, world](size_t param) {
    return ctx_.index.param(param).rowSharded ? 0 : layout_.chunk(param) * world;
  };
  gradBound_ = transientGradBound(ctx_.index, full, ctx_.comm.single() ? 0 : bucket_);
  gatherBound_ = gatherBound(
      ctx_.index, full, [this](size_t param) { return gatherer_.persistent(param); },
      ctx_.options.prefetchBucketSize);
}

// rowSharded params (param_table.h): the table points at this rank's rows of the partition and
// of the gradient partition for the whole run. Needs the partition as fp32 in memory. ZeRO++
// leaves them alone: the gatherer never gathers them (so neither qwZ's quantized gather nor
// hpZ's host copies see them) and queueGrad never reduces them (nor qgZ).
void BlockedStage::bindRowSharded() {
  for (size_t param = 0; param < ctx_.index.count(); ++param) {
    if (!ctx_.index.param(param).rowSharded) continue;
    const char* why = ctx_.options.halfCompute()         ? "bf16/fp16 compute"
                      : store_->masterAlias() == nullptr ? "offload_param nvme"
                      : ctx_.comm.single()               ? "one rank"
                                                         : nullptr;
    if (why != nullptr)
      throw InternalError(fmt::format(
          "zero stage 3: parameter '{}' is split by rows (vocabulary-parallel) but {} needs it "
          "gathered; the trainer must not split it then",
          ctx_.index.param(param).name, why));
    ctx_.table.value[param] = store_->masterAlias() + layout_.localOffset(param);
    ctx_.table.grad[param] = gradPart_ + layout_.localOffset(param);
  }
}

// Partitioned construction: only this rank's chunk of each parameter is read from the source,
// in pieces of at most kParamSourcePiece elements; the chunk's padding tail is zeros.
void BlockedStage::setParams(const TrainingEngine::ParamSource& source) {
  const size_t piece = TrainingEngine::kParamSourcePiece;
  std::vector<float> values;
  for (size_t param = 0; param < ctx_.index.count(); ++param) {
    gatherer_.release(param);
    const Shard own = layout_.ownRange(param, ctx_.comm.rank());
    const size_t local = layout_.localOffset(param), chunk = layout_.chunk(param);
    for (size_t done = 0; done < own.size; done += piece) {
      const size_t count = std::min(piece, own.size - done);
      values.resize(count);
      source(ctx_.index.offset(param) + own.offset + done, count, values.data());
      store_->write(local + done, count, values.data());
    }
    if (chunk > own.size) {
      values.assign(chunk - own.size, 0.f);
      store_->write(local + own.size, chunk - own.size, values.data());
    }
  }
  gatherer_.gatherPersistent();
}

void BlockedStage::getParams(float* fullFlat, OptimizerPartition& optimizer) {
  const size_t world = size_t(ctx_.comm.world());
  for (size_t param = 0; param < ctx_.index.count(); ++param) {
    const size_t chunk = layout_.chunk(param);
    std::vector<float> mine(chunk), all(chunk * world);
    optimizer.read(0, layout_.localOffset(param), chunk, mine.data());
    waitWork(ctx_.comm.allgather(mine.data(), all.data(), std::vector<size_t>(world, chunk),
                                 DType::kF32));
    std::memcpy(fullFlat + ctx_.index.offset(param), all.data(),
                ctx_.index.param(param).numel * sizeof(float));
  }
}

// Gathers block's params, prefetches the block `step` away and starts the swap reads of the
// next two (what the prefetch left out, and what the following prefetch takes).
void BlockedStage::gatherBlock(int block, int ahead, int step) {
  for (size_t param : ctx_.index.usedBy(block)) gatherer_.ensureGathered(param);
  gatherer_.prefetch(ahead);
  gatherer_.readAhead(ahead);
  gatherer_.readAhead(ahead + step);
  for (size_t param : ctx_.index.usedBy(block)) gatherer_.waitGathered(param);
}

void BlockedStage::beforeForward(int block) {
  gatherer_.setBackward(false);
  gatherBlock(block, block + 1, 1);
}

void BlockedStage::afterForward(int block) {
  // next use: the following block's forward, or this (last) block's backward
  gatherer_.releaseAfter(block, block + 1 < ctx_.index.numBlocks() ? block + 1 : block);
}

// Without parts: as forward, backwards. With parts (param_table.h): every param of the block is
// gathered now but only part 0's are waited for (the others complete while part 0 computes), and
// nothing of the previous block is prefetched yet: its first part is, at this block's last part,
// into the buffers the earlier parts hand back (so backward holds about what forward does: this
// block's copies and gradients, where prefetching the whole previous block here added a third
// block's worth; issue 15 item 3).
void BlockedStage::beforeBackward(int block) {
  gatherer_.setBackward(true);
  partsBegun_ = 0;
  if (ctx_.index.lastPart(block) == 0) {
    gatherBlock(block, block - 1, -1);
  } else {
    for (size_t param : ctx_.index.usedBy(block)) gatherer_.ensureGathered(param);
    gatherer_.readAhead(block - 1);
    gatherer_.readAhead(block - 2);
    waitPart(block, 0);
  }
  const size_t world = size_t(ctx_.comm.world());
  for (size_t param : ctx_.index.usedBy(block))
    if (!ctx_.index.param(param).rowSharded)
      transient_.acquire(param, layout_.chunk(param) * world);
}

// Waits for block's gathers of backward part `part` (a tied param is part 0).
void BlockedStage::waitPart(int block, int part) {
  for (size_t param : ctx_.index.usedBy(block))
    if (ctx_.index.param(param).backwardPart == part) gatherer_.waitGathered(param);
}

// The params of parts < part are done in this block (and used by no other): their copies go
// back to the pool and their gradients are reduced now, before this part's compute.
void BlockedStage::beforeBackwardPart(int block, int part) {
  const int handled = partsBegun_;  // parts < handled were released at an earlier call
  partsBegun_ = part;
  for (size_t param : ctx_.index.usedBy(block)) {
    if (!ctx_.index.doneBeforePart(param, part) || ctx_.index.doneBeforePart(param, handled))
      continue;
    gatherer_.release(param);
    queueGrad(param);
  }
  flushGrads();
  waitPart(block, part);
  if (part == ctx_.index.lastPart(block)) gatherer_.prefetch(block - 1, 0);
}

void BlockedStage::afterBackward(int block) {
  gatherer_.releaseAfter(block, block - 1);
  for (size_t param : ctx_.index.completeAfter(block))
    if (!ctx_.index.doneBeforePart(param, partsBegun_)) queueGrad(param);  // not queued yet
  partsBegun_ = 0;
  if (block == 0) finishReduction();
}

// Called when backward is over (afterBackward of block 0, or step as a fallback).
void BlockedStage::finishReduction() {
  flushGrads();  // queued params are freed by the flush, so the loop below sees only leftovers
  for (size_t param = 0; param < ctx_.index.count(); ++param)
    if (transient_.held(param)) queueGrad(param);
  flushGrads();
}

// Gradients are reduce-scattered per parameter (each padded to chunk*world, rank-major),
// coalesced into buckets of reduce_bucket_size elements.
void BlockedStage::queueGrad(size_t param) {
  if (ctx_.index.param(param).rowSharded) return;  // summed in place by the model
  if (ctx_.comm.single()) {
    // One rank: the reduce-scatter is the identity, so instead of packing the bucket, copying it
    // out and adding that, add the gradient into the partition (same sums, same bits).
    if (transient_.held(param))
      bulkAdd(gradPart_ + layout_.localOffset(param), transient_.data(param), layout_.chunk(param));
    transient_.release(param);
    return;
  }
  const size_t bucket = bucket_;
  const size_t need = layout_.chunk(param) * size_t(ctx_.comm.world());
  if (!queued_.empty() && queuedElems_ + need > bucket) flushGrads();
  if (need > bucket && !ctx_.options.quantizedGradients) return flushLarge(param);
  queued_.push_back(param);
  queuedElems_ += need;
  if (queuedElems_ >= bucket) flushGrads();
}

void BlockedStage::flushGrads() {
  if (queued_.empty()) return;
  std::vector<size_t> params;
  params.swap(queued_);
  const size_t total = queuedElems_, world = size_t(ctx_.comm.world());
  queuedElems_ = 0;
  const size_t perRank = total / world;
  const int slot = ctx_.buckets.acquire();
  auto& input = ctx_.buckets.input(slot);
  auto& output = ctx_.buckets.output(slot);
  if (input.size() < total) input.resize(total);  // a single param larger than the bucket
  if (output.size() < perRank) output.resize(perRank);
  size_t pos = 0;
  for (size_t rank = 0; rank < world; ++rank)
    for (size_t param : params) {
      const size_t chunk = layout_.chunk(param);
      if (!transient_.held(param)) bulkZero(input.data() + pos, chunk);
      else bulkCopy(input.data() + pos, transient_.data(param) + rank * chunk, chunk);
      pos += chunk;
    }
  for (size_t param : params) transient_.release(param);
  auto work = ctx_.options.quantizedGradients
                  ? ctx_.comm.reduceScatterSumQuantized(input.data(), output.data(), perRank)
                  : ctx_.comm.reduceScatterSum(input.data(), output.data(),
                                               std::vector<size_t>(world, perRank));
  auto finish = [this, params, out = output.data()] {
    size_t from = 0;
    for (size_t param : params) {
      bulkAdd(gradPart_ + layout_.localOffset(param), out + from, layout_.chunk(param));
      from += layout_.chunk(param);
    }
  };
  ctx_.buckets.issue(work, finish, slot);
}

// A parameter whose padded gradient exceeds the bucket: reduce-scattered in pieces of at most
// bucket/world elements of each rank's chunk, so the bucket buffers never grow past their size.
// Elementwise the same sums as one reduce-scatter of the whole parameter.
void BlockedStage::flushLarge(size_t param) {
  const size_t world = size_t(ctx_.comm.world()), chunk = layout_.chunk(param);
  const size_t piece = std::max<size_t>(1, bucket_ / world);
  const float* grad = transient_.held(param) ? transient_.data(param) : nullptr;
  for (size_t from = 0; from < chunk; from += piece) {
    const size_t count = std::min(piece, chunk - from);
    const int slot = ctx_.buckets.acquire();
    float* input = ctx_.buckets.input(slot).data();
    float* output = ctx_.buckets.output(slot).data();
    for (size_t rank = 0; rank < world; ++rank) {
      if (grad) bulkCopy(input + rank * count, grad + rank * chunk + from, count);
      else bulkZero(input + rank * count, count);
    }
    auto work = ctx_.comm.reduceScatterSum(input, output, std::vector<size_t>(world, count));
    const size_t dst = layout_.localOffset(param) + from;
    ctx_.buckets.issue(
        work, [this, output, dst, count] { bulkAdd(gradPart_ + dst, output, count); }, slot);
  }
  transient_.release(param);
}

void BlockedStage::zeroGrads() {
  if (gradFile_) gradFile_->zero();
  else bulkZero(gradPart_, localSize_);
}

void BlockedStage::writeModelRange(const LocalRange& range, const float* values) {
  store_->write(range.localOffset, range.size, values);
}

void BlockedStage::refreshModelParams() {
  gatherer_.releaseAll();
  gatherer_.gatherPersistent();
}

bool BlockedStage::gatherIssued(size_t param) const {
  return param < ctx_.index.count() && gatherer_.issued(param);
}

void BlockedStage::addMemory(MemoryReport& report) const {
  const std::string& paramDevice = ctx_.options.offloadParam.device;
  const MemPlace paramPlace = paramDevice == "cpu"    ? MemPlace::kHost
                              : paramDevice == "nvme" ? MemPlace::kNvme
                                                      : MemPlace::kDevice;
  store_->addMemory(report, paramPlace);
  const size_t elem = ctx_.options.halfCompute() ? 2 : 4, world = size_t(ctx_.comm.world());
  for (size_t param = 0; param < ctx_.index.count(); ++param)
    if (gatherer_.persistent(param))
      addBytes(report, MemKind::kParams, MemPlace::kDevice, layout_.chunk(param) * world * elem);
  addBytes(report, MemKind::kBuffers, MemPlace::kDevice,
           std::max(gatherer_.peakLiveElems(), gatherBound_) * elem);
  const MemPlace gradPlace = gradFile_                                 ? MemPlace::kNvme
                             : ctx_.options.offloadOptimizer.enabled() ? MemPlace::kHost
                                                                       : MemPlace::kDevice;
  addBytes(report, MemKind::kGrads, gradPlace, localSize_ * sizeof(float));
  addBytes(report, MemKind::kBuffers, MemPlace::kDevice,
           std::max(transient_.peakElems(), gradBound_) * sizeof(float));
}

}  // namespace ds::zero
