// ParamGatherer: stage 3's allgather, prefetch, read-ahead and release of parameters.
#include "zero/param_gatherer.h"

#include <algorithm>
#include <cstring>

#include "zero/block_quant.h"
#include "zero/dp_comm.h"
#include "zero/engine_trace.h"
#include "zero/param_index.h"
#include "zero/param_store.h"
#include "zero/partition.h"

namespace ds::zero {

ParamGatherer::ParamGatherer(const StageContext& ctx, const Stage3Layout& layout, ParamStore& store,
                             BufferPool<float>& pool32)
    : ctx_(ctx),
      layout_(layout),
      store_(store),
      pool32_(pool32),
      half_(ctx.options.halfCompute()),
      live32_(ctx.index.count()),
      live16_(ctx.index.count()),
      packed_(ctx.index.count()),
      work_(ctx.index.count()),
      gathering_(ctx.index.count(), 0),
      persistent_(ctx.index.count(), 0) {
  for (size_t param = 0; param < ctx_.index.count(); ++param)
    persistent_[param] = !rowSharded(param) &&
                         ctx_.index.param(param).numel <= ctx_.options.paramPersistenceThreshold;
}

bool ParamGatherer::rowSharded(size_t param) const { return ctx_.index.param(param).rowSharded; }

bool ParamGatherer::quantized() const {
  return ctx_.options.quantizedWeights && !ctx_.comm.single();
}

size_t ParamGatherer::fullSize(size_t param) const {
  return layout_.chunk(param) * size_t(ctx_.comm.world());
}

void ParamGatherer::setSecondary(DpComm* secondary) {
  secondary_ = secondary;
  secondaryCopy_.assign(ctx_.index.count(), {});
  fromSecondary_.assign(ctx_.index.count(), 0);
}

bool ParamGatherer::usesSecondary(size_t param) const {
  return backward_ && secondary_ && !persistent_[param] && !secondaryCopy_[param].empty();
}

// hpZ: backward gathers the copy forward left in this host's group (k ranks, k pieces).
void ParamGatherer::gatherSecondary(size_t param) {
  const size_t full = fullSize(param), groupSize = size_t(secondary_->world());
  const size_t piece = full / groupSize;
  const std::vector<size_t> counts(groupSize, piece);
  const std::vector<char>& mine = secondaryCopy_[param];
  if (half_) {
    pool16_.take(live16_[param], full, false);
    work_[param] =
        secondary_->allgather(mine.data(), live16_[param].data(), counts, ctx_.options.compute);
  } else {
    pool32_.take(live32_[param], full, false);
    work_[param] = secondary_->allgather(mine.data(), live32_[param].data(), counts, DType::kF32);
  }
  fromSecondary_[param] = 1;
}

// hpZ: after a forward gather, keep this rank's piece of the full copy for backward.
void ParamGatherer::keepSecondary(size_t param) {
  const size_t piece = fullSize(param) / size_t(secondary_->world());
  const size_t elem = half_ ? sizeof(uint16_t) : sizeof(float);
  const char* base = half_ ? reinterpret_cast<const char*>(live16_[param].data())
                           : reinterpret_cast<const char*>(live32_[param].data());
  auto& copy = secondaryCopy_[param];
  copy.resize(piece * elem);
  std::memcpy(copy.data(), base + size_t(secondary_->rank()) * piece * elem, copy.size());
}

void ParamGatherer::ensureGathered(size_t param) {
  if (rowSharded(param) || issued(param)) return;
  const size_t chunk = layout_.chunk(param), full = fullSize(param);
  const std::vector<size_t> counts(size_t(ctx_.comm.world()), chunk);
  const size_t local = layout_.localOffset(param), mine = size_t(ctx_.comm.rank()) * chunk;
  if (usesSecondary(param)) {
    gatherSecondary(param);
  } else if (quantized()) {
    const size_t packed = quantPackedBytes(chunk);
    packed_[param].resize(packed * size_t(ctx_.comm.world()));
    uint8_t* myPacked = packed_[param].data() + size_t(ctx_.comm.rank()) * packed;
    if (half_) {
      pool16_.take(live16_[param], full, false);
      const void* input = store_.gatherInput(param, local, chunk, live16_[param].data() + mine);
      quantizeBlocksBf16(static_cast<const uint16_t*>(input), chunk, myPacked);
    } else {
      pool32_.take(live32_[param], full, false);
      const void* input = store_.gatherInput(param, local, chunk, live32_[param].data() + mine);
      quantizeBlocks(static_cast<const float*>(input), chunk, myPacked);
    }
    work_[param] =
        ctx_.comm.allgather(myPacked, packed_[param].data(),
                            std::vector<size_t>(size_t(ctx_.comm.world()), packed), DType::kU8);
  } else if (half_) {
    pool16_.take(live16_[param], full, false);  // the allgather writes every element
    const void* input = store_.gatherInput(param, local, chunk, live16_[param].data() + mine);
    work_[param] = ctx_.comm.allgather(input, live16_[param].data(), counts, ctx_.options.compute);
  } else {
    pool32_.take(live32_[param], full, false);
    const void* input = store_.gatherInput(param, local, chunk, live32_[param].data() + mine);
    work_[param] = ctx_.comm.allgather(input, live32_[param].data(), counts, DType::kF32);
  }
  gathering_[param] = 1;
  ctx_.tracer.note(TraceEvent::Kind::kGatherIssued, int64_t(param));
  if (!persistent_[param]) {
    liveElems_ += full;
    peakLiveElems_ = std::max(peakLiveElems_, liveElems_);
  }
}

void ParamGatherer::waitGathered(size_t param) {
  if (!gathering_[param]) return;
  ctx_.tracer.note(TraceEvent::Kind::kGatherWaited, int64_t(param),
                   !work_[param] || work_[param]->isCompleted());
  waitWork(work_[param]);
  work_[param] = nullptr;
  gathering_[param] = 0;
  const bool secondary = fromSecondary_.empty() ? false : fromSecondary_[param] != 0;
  if (secondary) fromSecondary_[param] = 0;
  if (quantized() && !secondary) {
    const size_t chunk = layout_.chunk(param), packed = quantPackedBytes(chunk);
    for (size_t r = 0; r < size_t(ctx_.comm.world()); ++r) {
      const uint8_t* src = packed_[param].data() + r * packed;
      if (half_) dequantizeBlocksBf16(src, chunk, live16_[param].data() + r * chunk);
      else dequantizeBlocks(src, chunk, live32_[param].data() + r * chunk);
    }
    std::vector<uint8_t>().swap(packed_[param]);
  }
  if (secondary_ && !secondary && !backward_ && !persistent_[param]) keepSecondary(param);
  if (half_) ctx_.table.value16[param] = reinterpret_cast<const ds::bf16*>(live16_[param].data());
  else ctx_.table.value[param] = live32_[param].data();
}

void ParamGatherer::prefetch(int block, int part) {
  if (!ctx_.index.validBlock(block)) return;
  size_t budget = ctx_.options.prefetchBucketSize;
  for (size_t param : ctx_.index.usedBy(block)) {
    if (rowSharded(param) || issued(param)) continue;
    if (part >= 0 && ctx_.index.param(param).backwardPart != part) continue;
    const size_t full = fullSize(param);
    if (full > budget || liveElems_ + full > ctx_.options.maxLiveParameters) break;
    budget -= full;
    ensureGathered(param);
  }
}

// Submits the swap reads of block's parameters that are neither gathered nor being gathered,
// so that their gather later finds the bytes already read (the read runs while the current
// block computes).
void ParamGatherer::readAhead(int block) {
  if (!store_.readsAhead() || !ctx_.index.validBlock(block)) return;
  for (size_t param : ctx_.index.usedBy(block)) {
    if (persistent_[param] || rowSharded(param) || issued(param) || store_.readPending(param))
      continue;
    store_.readAhead(param, layout_.localOffset(param), layout_.chunk(param));
  }
}

void ParamGatherer::release(size_t param) {
  if (persistent_[param] || rowSharded(param)) return;
  if (gathering_[param]) waitGathered(param);
  if (!held(param)) return;
  ctx_.tracer.note(TraceEvent::Kind::kReleased, int64_t(param));
  liveElems_ -= half_ ? live16_[param].size() : live32_[param].size();
  pool32_.give(live32_[param]);
  pool16_.give(live16_[param]);
  ctx_.table.value[param] = nullptr;
  ctx_.table.value16[param] = nullptr;
}

void ParamGatherer::releaseAll() {
  for (size_t param = 0; param < ctx_.index.count(); ++param) release(param);
}

void ParamGatherer::releaseAfter(int block, int nextBlock) {
  for (size_t param : ctx_.index.usedBy(block)) {
    if (nextBlock >= 0 && ctx_.index.uses(nextBlock, param)) continue;
    release(param);
  }
}

void ParamGatherer::gatherPersistent() {
  for (size_t param = 0; param < ctx_.index.count(); ++param)
    if (persistent_[param]) {
      gathering_[param] = 0;
      ctx_.table.value[param] = nullptr;
      ctx_.table.value16[param] = nullptr;
      ensureGathered(param);
    }
  for (size_t param = 0; param < ctx_.index.count(); ++param)
    if (persistent_[param]) waitGathered(param);
}

void ParamGatherer::addPipeline(PipelineState& state) {
  for (size_t param = 0; param < gathering_.size(); ++param)
    if (gathering_[param]) {
      ++state.gathersInFlight;
      if (!work_[param] || work_[param]->isCompleted()) ++state.gathersCompletedInFlight;
    }
  state.liveElems = liveElems_;
  state.peakLiveElems = peakLiveElems_;
  if (!store_.readsAhead()) return;
  for (size_t param = 0; param < ctx_.index.count(); ++param)
    if (store_.readPending(param)) {
      ++state.swapReadsAhead;
      if (store_.readCompleted(param)) ++state.swapReadsAheadCompleted;
    }
}

}  // namespace ds::zero
