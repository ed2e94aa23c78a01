// FlatPartitionedStage: stage 1/2 gradient buckets, the gradient partition and the parameter
// allgather after the optimizer.
#include "zero/flat_partitioned_stage.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"
#include "zero/bucket_queue.h"
#include "zero/bulk_ops.h"
#include "zero/dp_comm.h"
#include "zero/optimizer_partition.h"
#include "zero/param_index.h"
#include "zero/transient_bounds.h"

namespace ds::zero {
namespace {

size_t partStartOf(const StageContext& ctx) {
  return FlatLayout(ctx.index.numel(), ctx.comm.world()).paddedShard(ctx.comm.rank()).offset;
}

}  // namespace

FlatPartitionedStage::FlatPartitionedStage(const StageContext& ctx)
    : FlatStage(ctx, /*reduceEveryMicroStep=*/ctx.options.stage == 2, partStartOf(ctx)),
      partitionGrads_(ctx.options.stage == 2),
      transient_(ctx.table, pool_, ctx.index.count()) {
  const size_t world = size_t(ctx_.comm.world());
  localSize_ = layout_.partSize();
  const Shard real = layout_.realShard(ctx_.comm.rank());
  optimizerCount_ = real.size;
  if (real.size) ranges_.push_back({real.offset, real.offset - partStart_, real.size});
  gatherChunk_ = std::max<size_t>(1, ctx_.options.allgatherBucketSize / world);
  if (gatherChunk_ < localSize_) gatherStaging_.assign(gatherChunk_ * world * (half_ ? 1 : 2), 0);
  if (partitionGrads_) {
    gradPart_.assign(localSize_, 0.f);
  } else {
    fullGrads_.assign(layout_.padded(), 0.f);
    for (size_t param = 0; param < ctx_.index.count(); ++param)
      ctx_.table.grad[param] = &fullGrads_[ctx_.index.offset(param)];
  }
  // Bucket buffers (stage 2's input, both stages' reduce-scatter output): clamped, see
  // effectiveReduceBucket (zero_options.h).
  const size_t cap =
      effectiveReduceBucket(ctx_.options.reduceBucketSize, localSize_, layout_.padded());
  bucket_ = cap;
  if (partitionGrads_ && ctx_.options.reduceScatter) {
    paramBuckets_ = std::make_unique<ParamBuckets>(ctx_, layout_, transient_, gradPart_.data(),
                                                   partStart_, cap);
    takeGradsByRows();
    transientBound_ = transientGradBound(
        ctx_.index,
        [this](size_t param) { return byRows(param) ? 0 : ctx_.index.param(param).numel; }, cap);
  } else if (partitionGrads_) {  // flat frontier: a gradient may be held until backward ends
    transientBound_ = ctx_.index.numel();
  }
  ctx_.buckets.allocate(partitionGrads_ ? cap : 0, std::min(cap, localSize_));
}

FlatPartitionedStage::~FlatPartitionedStage() = default;

// With whole-parameter buckets: every gradByRows parameter whose whole rows fit a bucket (the
// model's chunk is at least one row) comes by rows.
void FlatPartitionedStage::takeGradsByRows() {
  const ParamIndex& index = ctx_.index;
  for (size_t param = 0; param < index.count(); ++param) {
    const ParamInfo& info = index.param(param);
    if (!info.gradByRows || info.shape.empty() || info.shape[0] <= 0 || info.numel == 0 ||
        info.numel / size_t(info.shape[0]) > bucket_)
      continue;
    if (byRows_.empty()) {
      byRows_.assign(index.count(), 0);
      rowsGiven_.assign(index.count(), 0);
      ctx_.table.rowSink.assign(index.count(), nullptr);
    }
    byRows_[param] = 1;
    ctx_.table.rowSink[param] = this;
  }
}

size_t FlatPartitionedStage::rowsPerChunk(size_t param) const {
  const ParamInfo& info = ctx_.index.param(param);
  const size_t cols = info.numel / size_t(info.shape[0]);
  // Whole multiples of 96 rows where the bucket allows: a multiple of the row blocking of
  // OpenBLAS's sgemm kernels (16, 24 or 32 rows), so a chunked product rounds like one call.
  const size_t rows = std::max<size_t>(1, bucket_ / cols);
  return rows >= 96 ? rows - rows % 96 : rows;
}

float* FlatPartitionedStage::beginRows(size_t param, size_t first, size_t rows) {
  const ParamInfo& info = ctx_.index.param(param);
  const size_t cols = info.numel / size_t(info.shape[0]);
  if (!byRows(param) || rowSlot_ >= 0 || rows > rowsPerChunk(param) || first != rowsGiven_[param])
    throw InternalError(fmt::format(
        "zero stage 2: the gradient of '{}' by rows: chunk [{}, {}) out of order (rows given so "
        "far {}, chunk at most {}{})",
        info.name, first, first + rows, byRows(param) ? rowsGiven_[param] : 0,
        byRows(param) ? rowsPerChunk(param) : 0, rowSlot_ >= 0 ? ", a chunk still open" : ""));
  rowSlot_ = ctx_.buckets.acquire();
  float* buf = ctx_.buckets.input(rowSlot_).data();
  bulkZero(buf, rows * cols);
  return buf;
}

void FlatPartitionedStage::endRows(size_t param, size_t first, size_t rows) {
  const ParamInfo& info = ctx_.index.param(param);
  const size_t cols = info.numel / size_t(info.shape[0]);
  if (rowSlot_ < 0 || first != rowsGiven_[param])
    throw InternalError(
        fmt::format("zero stage 2: the gradient of '{}' by rows: rows [{}, {}) "
                    "ended but not begun",
                    info.name, first, first + rows));
  const int slot = std::exchange(rowSlot_, -1);
  rowsGiven_[param] += rows;
  const size_t begin = ctx_.index.offset(param) + first * cols, count = rows * cols;
  const float* buf = ctx_.buckets.input(slot).data();
  if (ctx_.comm.single()) {  // the reduction is the identity (ParamBuckets::queue)
    bulkAdd(gradPart_.data() + (begin - partStart_), buf, count);
    ctx_.buckets.release(slot);
    return;
  }
  emitReduceScatter(slot, buf, begin, begin + count);
}

void FlatPartitionedStage::afterBackward(int block) {
  if (!paramBuckets_) return FlatStage::afterBackward(block);
  for (size_t param : ctx_.index.completeAfter(block)) {
    if (!byRows(param)) {
      paramBuckets_->queue(param);
      continue;
    }
    const ParamInfo& info = ctx_.index.param(param);
    if (rowsGiven_[param] != size_t(info.shape[0]))
      throw InternalError(fmt::format(
          "zero stage 2: the backward of block {} completed '{}' with {} of its {} gradient rows "
          "given by rows",
          block, info.name, rowsGiven_[param], info.shape[0]));
    rowsGiven_[param] = 0;
  }
  if (block == 0) paramBuckets_->flush();  // backward is over
}

void FlatPartitionedStage::finishReduction() {
  if (!paramBuckets_) return FlatStage::finishReduction();
  paramBuckets_->flush();
  for (size_t param = 0; param < ctx_.index.count(); ++param)
    if (transient_.held(param)) paramBuckets_->queue(param);
  paramBuckets_->flush();
}

const float* FlatPartitionedStage::localGrads() {
  return partitionGrads_ ? gradPart_.data() : fullGrads_.data() + partStart_;
}

void FlatPartitionedStage::clearGrads() {
  if (partitionGrads_) bulkZero(gradPart_.data(), gradPart_.size());
  else bulkZero(fullGrads_.data(), fullGrads_.size());
}

void FlatPartitionedStage::allocGrads(int block) {
  if (!partitionGrads_) return;
  for (size_t param : ctx_.index.usedBy(block))
    if (!byRows(param)) transient_.acquire(param, ctx_.index.param(param).numel);
}

// Stage 2: copies the completed params' grads in [begin, end) into the slot's contiguous
// bucket and frees those fully emitted; stage 1: the bucket is the full gradient buffer itself.
const float* FlatPartitionedStage::fillBucket(int slot, size_t begin, size_t end) {
  if (!partitionGrads_) return fullGrads_.data() + begin;
  float* buf = ctx_.buckets.input(slot).data();
  bulkZero(buf, end - begin);
  const ParamIndex& index = ctx_.index;
  for (size_t param = index.paramAt(begin); param < index.count() && index.offset(param) < end;
       ++param) {
    const size_t offset = index.offset(param);
    const Shard overlap = intersect({begin, end - begin}, {offset, index.param(param).numel});
    if (overlap.size && transient_.held(param))
      bulkCopy(buf + (overlap.offset - begin), transient_.data(param) + (overlap.offset - offset),
               overlap.size);
    if (offset >= begin) transient_.release(param);  // fully emitted
  }
  return buf;
}

// One rank: the reduction is the identity and the partition is the whole model, so the bucket
// (zero, copy in, copy out, add) collapses to one add of each held gradient into the partition
// (stage 2), or to nothing (stage 1: the full gradients are the partition). The same sums in the
// same order as the bucket path, so the same bits.
void FlatPartitionedStage::reduceSingle(size_t begin, size_t end) {
  if (!partitionGrads_) return;
  const ParamIndex& index = ctx_.index;
  for (size_t param = index.paramAt(begin); param < index.count() && index.offset(param) < end;
       ++param) {
    const size_t offset = index.offset(param);
    const Shard overlap = intersect({begin, end - begin}, {offset, index.param(param).numel});
    if (overlap.size && transient_.held(param))
      bulkAdd(gradPart_.data() + (overlap.offset - partStart_),
              transient_.data(param) + (overlap.offset - offset), overlap.size);
    if (offset >= begin) transient_.release(param);  // fully emitted
  }
}

void FlatPartitionedStage::emitBucket(size_t begin, size_t end) {
  if (ctx_.comm.single()) return reduceSingle(begin, end);
  const int slot = ctx_.buckets.acquire();
  const float* input = fillBucket(slot, begin, end);
  if (ctx_.options.reduceScatter) emitReduceScatter(slot, input, begin, end);
  else emitAllreduce(slot, begin, end);
}

// reduce_scatter=false: allreduce the bucket in place and keep this rank's slice.
void FlatPartitionedStage::emitAllreduce(int slot, size_t begin, size_t end) {
  const size_t count = end - begin;
  const Shard mine = intersect({begin, count}, layout_.paddedShard(ctx_.comm.rank()));
  float* buf = partitionGrads_ ? ctx_.buckets.input(slot).data() : fullGrads_.data() + begin;
  auto work = ctx_.comm.allreduceSum(buf, count);
  std::function<void()> finish;
  if (partitionGrads_ && mine.size)
    finish = [this, buf, src = mine.offset - begin, dst = mine.offset - partStart_,
              size = mine.size] { bulkAdd(gradPart_.data() + dst, buf + src, size); };
  ctx_.buckets.issue(work, finish, slot, /*allreduce=*/true);
}

void FlatPartitionedStage::emitReduceScatter(int slot, const float* input, size_t begin,
                                             size_t end) {
  const Shard mine = intersect({begin, end - begin}, layout_.paddedShard(ctx_.comm.rank()));
  float* out = ctx_.buckets.output(slot).data();
  auto work = ctx_.comm.reduceScatterSum(input, out, layout_.counts({begin, end - begin}));
  std::function<void()> finish;
  if (mine.size) {
    const size_t dst = mine.offset - partStart_;
    if (partitionGrads_) {
      finish = [this, out, dst, size = mine.size] { bulkAdd(gradPart_.data() + dst, out, size); };
    } else {
      finish = [this, out, dst, size = mine.size] {
        bulkCopy(fullGrads_.data() + partStart_ + dst, out, size);
      };
    }
  }
  ctx_.buckets.issue(work, finish, slot);
}

void FlatPartitionedStage::getParams(float* fullFlat, OptimizerPartition& optimizer) {
  std::vector<float> mine(localSize_, 0.f), all(layout_.padded());
  optimizer.read(0, 0, optimizerCount_, mine.data());
  waitWork(ctx_.comm.allgather(mine.data(), all.data(),
                               std::vector<size_t>(size_t(ctx_.comm.world()), localSize_),
                               DType::kF32));
  std::memcpy(fullFlat, all.data(), ctx_.index.numel() * sizeof(float));
}

void FlatPartitionedStage::refreshModelParams() {
  const size_t elem = elemBytes();
  const int world = ctx_.comm.world();
  char* full = paramBytes();
  if (world == 1) return;            // the optimizer wrote the only partition in place (modelSink)
  if (gatherChunk_ >= localSize_) {  // in place: this rank's block already sits at its offset
    waitWork(ctx_.comm.allgather(full + partStart_ * elem, full,
                                 std::vector<size_t>(size_t(world), localSize_), paramDtype()));
    return;
  }
  char* staging = reinterpret_cast<char*>(gatherStaging_.data());
  for (size_t chunk = 0; chunk < localSize_; chunk += gatherChunk_) {
    const size_t count = std::min(gatherChunk_, localSize_ - chunk);
    waitWork(ctx_.comm.allgather(full + (partStart_ + chunk) * elem, staging,
                                 std::vector<size_t>(size_t(world), count), paramDtype()));
    for (int rank = 0; rank < world; ++rank)
      if (rank != ctx_.comm.rank())
        std::memcpy(full + (size_t(rank) * localSize_ + chunk) * elem,
                    staging + size_t(rank) * count * elem, count * elem);
  }
}

// One rank: the optimizer writes the only partition in place (refreshModelParams does nothing).
Stage::ParamsFinal FlatPartitionedStage::paramsFinal() const {
  return ctx_.comm.single() ? ParamsFinal::kPerTile : ParamsFinal::kAfterRefresh;
}

void FlatPartitionedStage::addMemory(MemoryReport& report) const {
  FlatStage::addMemory(report);
  const MemPlace gradPlace = !partitionGrads_ || !ctx_.options.offloadOptimizer.enabled()
                                 ? MemPlace::kDevice
                                 : MemPlace::kHost;
  addBytes(report, MemKind::kGrads, gradPlace,
           (fullGrads_.size() + gradPart_.size()) * sizeof(float));
  addBytes(report, MemKind::kBuffers, MemPlace::kDevice,
           gatherStaging_.size() * sizeof(uint16_t) +
               std::max(transient_.peakElems(), transientBound_) * sizeof(float));
}

}  // namespace ds::zero
