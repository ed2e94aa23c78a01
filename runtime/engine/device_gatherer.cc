// DeviceGatherer (see device_gatherer.h): per-block slot layouts fixed at construction, the host
// engine's prefetch rule, two slots.
#include "runtime/engine/device_gatherer.h"

#include <algorithm>

#include "comm/process_group.h"
#include "core/error.h"

namespace ds::runtime {
namespace {

size_t alignUp(size_t n) {
  return (n + zero::kAlignElems - 1) / zero::kAlignElems * zero::kAlignElems;
}

}  // namespace

DeviceGatherer::DeviceGatherer(Ops& ops, const zero::ParamIndex& index,
                               const zero::Stage3Layout& layout, comm::ProcessGroup* group,
                               const zero::ZeroOptions& zopts, zero::ParamTable& table,
                               zero::Tracer& tracer, const void* part)
    : ops_(ops),
      index_(index),
      layout_(layout),
      group_(group),
      zopts_(zopts),
      table_(table),
      tracer_(tracer),
      part_(part),
      dt_(zopts.compute),
      elem_(dtypeSize(zopts.compute)) {
  if (group_ != nullptr) world_ = group_->size();
  const size_t n = index_.count();
  persistentParam_.assign(n, 0);
  persistentOffset_.assign(n, 0);
  size_t persistentElems = 0;
  for (size_t p = 0; p < n; ++p) {
    if (index_.param(p).numel > zopts_.paramPersistenceThreshold) continue;
    persistentParam_[p] = 1;
    persistentOffset_[p] = persistentElems;
    persistentElems += alignUp(fullSize(p));
  }
  blocks_.resize(size_t(index_.numBlocks()));
  for (int b = 0; b < index_.numBlocks(); ++b) {
    size_t at = 0;
    for (size_t p : index_.usedBy(b)) {
      if (persistentParam_[p]) continue;
      Copy copy;
      copy.param = p;
      copy.offset = at;
      blocks_[size_t(b)].push_back(copy);
      at += alignUp(fullSize(p));
    }
    slotElems_ = std::max(slotElems_, at);
  }
  // The running block's slot and the prefetched one's; one when the knobs allow no prefetch.
  const int slots = zopts_.prefetchBucketSize > 0 && zopts_.maxLiveParameters > 0 ? 2 : 1;
  slotOf_.assign(blocks_.size(), -1);
  blockIn_.assign(size_t(slots), -1);
  slots_ = OpsBuffer(ops_, size_t(slots) * slotElems_ * elem_, "stage-3 parameter gather slots");
  persistent_ = OpsBuffer(ops_, persistentElems * elem_, "stage-3 persistent parameters");
}

DeviceGatherer::~DeviceGatherer() {
  for (auto& copies : blocks_)
    for (auto& copy : copies) {
      if (!copy.work) continue;
      try {
        copy.work->wait();
      } catch (...) {  // reported where it was first waited for, or by the caller's failure
      }
    }
}

void* DeviceGatherer::slotAt(int slot, size_t offset) const {
  return slots_.as<char>() + (size_t(slot) * slotElems_ + offset) * elem_;
}

// The allgather of param's chunks (this rank's from the partition) into `out` [chunk * world].
void DeviceGatherer::gatherInto(size_t param, void* out, comm::WorkPtr* work) {
  const size_t chunk = layout_.chunk(param);
  const void* in = static_cast<const char*>(part_) + layout_.localOffset(param) * elem_;
  if (group_ == nullptr || world_ == 1) {
    ops_.copy(out, in, chunk * elem_);
    return;
  }
  const comm::Device where = ops_.onDevice() ? comm::Device::kCuda : comm::Device::kCpu;
  *work = group_->allgather({const_cast<void*>(in), chunk, dt_, where},
                            {out, chunk * size_t(world_), dt_, where},
                            std::vector<size_t>(size_t(world_), chunk));
}

void DeviceGatherer::publish(size_t param, void* at) {
  if (dt_ == DType::kF32) table_.value[param] = static_cast<float*>(at);
  else table_.value16[param] = static_cast<const bf16*>(at);
}

bool DeviceGatherer::published(size_t param, const void* at) const {
  return table_.value[param] == at || table_.value16[param] == at;
}

// A free slot for block (already held: its own). evict: when none is free, the slot of another
// block is released (a prefetch, or a block whose next use never came) rather than failing.
int DeviceGatherer::takeSlot(int block, bool evict) {
  if (slotOf_[size_t(block)] >= 0) return slotOf_[size_t(block)];
  for (int s = 0; s < int(blockIn_.size()); ++s)
    if (blockIn_[size_t(s)] < 0) {
      blockIn_[size_t(s)] = block;
      slotOf_[size_t(block)] = s;
      return s;
    }
  if (!evict) return -1;
  release(blockIn_[0]);
  return takeSlot(block, false);
}

void DeviceGatherer::issue(int block, Copy& copy) {
  gatherInto(copy.param, slotAt(slotOf_[size_t(block)], copy.offset), &copy.work);
  copy.issued = true;
  copy.waited = false;
  tracer_.note(zero::TraceEvent::Kind::kGatherIssued, int64_t(copy.param));
  live_ += fullSize(copy.param);
  peakLive_ = std::max(peakLive_, live_);
}

void DeviceGatherer::acquire(int block, int ahead) {
  auto& copies = blocks_[size_t(block)];
  if (!copies.empty()) {
    takeSlot(block, true);
    for (auto& copy : copies)
      if (!copy.issued) issue(block, copy);
  }
  // The prefetch, as zero::ParamGatherer::prefetch: in order, within both budgets, stopping at
  // the first parameter that does not fit.
  if (ahead >= 0 && ahead < index_.numBlocks() && ahead != block) {
    size_t budget = zopts_.prefetchBucketSize;
    for (auto& copy : blocks_[size_t(ahead)]) {
      if (copy.issued) continue;
      const size_t full = fullSize(copy.param);
      if (full > budget || live_ + full > zopts_.maxLiveParameters) break;
      if (takeSlot(ahead, false) < 0) break;  // both slots busy: gathered on demand instead
      budget -= full;
      issue(ahead, copy);
    }
  }
  for (auto& copy : copies) {
    if (!copy.waited) {
      tracer_.note(zero::TraceEvent::Kind::kGatherWaited, int64_t(copy.param),
                   !copy.work || copy.work->isCompleted());
      waitGather(copy);
      copy.waited = true;
    }
    publish(copy.param, slotAt(slotOf_[size_t(block)], copy.offset));
  }
}

// A gather whose Work has a device event (NCCL): the compute stream waits on it, so the block's
// kernels are queued at once; the Work stays held and is waited on the host in release(), after
// them, where a failure (or a dead peer) is still reported. Otherwise (gloo, mpi: completed on
// the host) the host waits here. Safe because the compute stream is the legacy default stream,
// which NCCL's group stream waits on at every issue: a slot is rewritten only after its readers.
void DeviceGatherer::waitGather(Copy& copy) {
  if (!copy.work) return;
  const void* event = copy.work->deviceEvent();
  if (event != nullptr && ops_.streamWaitForeign(OpsStream::kCompute, event)) return;
  copy.work->wait();
  copy.work = nullptr;
}

void DeviceGatherer::release(int block) {
  const int slot = slotOf_[size_t(block)];
  if (slot < 0) return;
  for (auto& copy : blocks_[size_t(block)]) {
    if (!copy.issued) continue;
    if (copy.work) copy.work->wait();  // the collective still writes the slot
    copy.work = nullptr;
    copy.issued = copy.waited = false;
    tracer_.note(zero::TraceEvent::Kind::kReleased, int64_t(copy.param));
    live_ -= fullSize(copy.param);
    const void* at = slotAt(slot, copy.offset);
    if (published(copy.param, at)) {
      table_.value[copy.param] = nullptr;
      table_.value16[copy.param] = nullptr;
    }
  }
  slotOf_[size_t(block)] = -1;
  blockIn_[size_t(slot)] = -1;
}

void DeviceGatherer::releaseAll() {
  for (int b = 0; b < index_.numBlocks(); ++b) release(b);
}

void DeviceGatherer::gatherPersistent() {
  const size_t n = index_.count();
  std::vector<comm::WorkPtr> work(n);
  for (size_t p = 0; p < n; ++p) {
    if (!persistentParam_[p]) continue;
    gatherInto(p, persistent_.as<char>() + persistentOffset_[p] * elem_, &work[p]);
    tracer_.note(zero::TraceEvent::Kind::kGatherIssued, int64_t(p));
  }
  for (size_t p = 0; p < n; ++p) {
    if (!persistentParam_[p]) continue;
    tracer_.note(zero::TraceEvent::Kind::kGatherWaited, int64_t(p),
                 !work[p] || work[p]->isCompleted());
    if (work[p]) work[p]->wait();
    publish(p, persistent_.as<char>() + persistentOffset_[p] * elem_);
  }
}

}  // namespace ds::runtime
