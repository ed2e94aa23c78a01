// DeviceStage3 (see device_stage3.h): the hooks, the gradient slots and the bucket plan, fixed at
// construction.
#include "runtime/engine/device_stage3.h"

#include <algorithm>
#include <set>

#include "comm/process_group.h"
#include "core/error.h"

namespace ds::runtime {
namespace {

size_t alignUp(size_t n) {
  return (n + zero::kAlignElems - 1) / zero::kAlignElems * zero::kAlignElems;
}

int worldOf(comm::ProcessGroup* group) { return group == nullptr ? 1 : group->size(); }

int numBlocksOf(const std::vector<zero::ParamInfo>& params) {
  int n = 1;
  for (const auto& p : params)
    for (int b : p.blocks) n = std::max(n, b + 1);
  return n;
}

}  // namespace

size_t DeviceStage3::localSize(const std::vector<zero::ParamInfo>& params, int world) {
  return zero::Stage3Layout(params, world).localSize();
}

DeviceStage3::DeviceStage3(Ops& ops, const std::vector<zero::ParamInfo>& params,
                           comm::ProcessGroup* group, const zero::ZeroOptions& zopts,
                           zero::ParamTable& table, zero::Tracer& tracer, Partition part)
    : ops_(ops),
      group_(group),
      zopts_(zopts),
      table_(table),
      tracer_(tracer),
      part_(part),
      world_(worldOf(group)),
      index_(params, numBlocksOf(params)),
      layout_(params, world_),
      gatherer_(ops, index_, layout_, group, zopts, table, tracer, part.params) {
  const size_t n = index_.count(), world = size_t(world_);
  slotOffset_.assign(n, kNone);
  tiedOffset_.assign(n, kNone);
  tiedHeld_.assign(n, 0);
  size_t tiedElems = 0;
  for (size_t p = 0; p < n; ++p) {
    const auto& blocks = index_.param(p).blocks;
    if (std::set<int>(blocks.begin(), blocks.end()).size() < 2) continue;
    tiedOffset_[p] = tiedElems;
    tiedElems += alignUp(layout_.chunk(p) * world);
  }
  size_t slotElems = 0;
  slotUsed_.assign(size_t(index_.numBlocks()), 0);
  plan_.resize(size_t(index_.numBlocks()));
  const size_t cap = std::max<size_t>(zopts_.reduceBucketSize, 1);
  for (int b = 0; b < index_.numBlocks(); ++b) {
    size_t at = 0;
    for (size_t p : index_.usedBy(b)) {
      if (tied(p)) continue;
      slotOffset_[p] = at;
      at += alignUp(layout_.chunk(p) * world);
    }
    slotUsed_[size_t(b)] = at;
    slotElems = std::max(slotElems, at);
    // zero::BlockedStage::queueGrad's rule, the queue flushed at the end of each block and a tied
    // parameter always alone.
    auto& buckets = plan_[size_t(b)];
    std::vector<size_t> queued;
    size_t queuedElems = 0;
    auto flush = [&] {
      if (queued.empty()) return;
      buckets.push_back(queued);
      if (!direct(queued)) bucketIn_ = std::max(bucketIn_, queuedElems);
      bucketOut_ = std::max(bucketOut_, queuedElems / world);
      queued.clear();
      queuedElems = 0;
    };
    for (size_t p : index_.completeAfter(b)) {
      const size_t need = layout_.chunk(p) * world;
      if (tied(p)) {  // a bucket of its own: reduce-scattered from its buffer (direct())
        flush();
        queued.push_back(p);
        queuedElems = need;
        flush();
        continue;
      }
      if (!queued.empty() && queuedElems + need > cap) flush();
      queued.push_back(p);
      queuedElems += need;
      if (queuedElems >= cap) flush();
    }
    flush();
  }
  gradSlot_ = OpsBuffer(ops_, slotElems * sizeof(float), "stage-3 gradient slot");
  tiedGrads_ = OpsBuffer(ops_, tiedElems * sizeof(float), "stage-3 tied-parameter gradients");
  if (world_ > 1)
    for (int s = 0; s < kBuckets; ++s) {
      bucketInBuf_[s] = OpsBuffer(ops_, bucketIn_ * sizeof(float), "stage-3 reduce bucket input");
      bucketOutBuf_[s] =
          OpsBuffer(ops_, bucketOut_ * sizeof(float), "stage-3 reduce bucket output");
    }
}

DeviceStage3::~DeviceStage3() {
  for (auto& f : inFlight_) {
    try {
      f.work->wait();
    } catch (...) {  // the failure was (or will be) reported where it happened
    }
  }
}

float* DeviceStage3::gradOf(size_t param) const {
  if (tied(param)) return tiedGrads_.as<float>() + tiedOffset_[param];
  return gradSlot_.as<float>() + slotOffset_[param];
}

void DeviceStage3::beforeForward(int block) {
  DS_CHECK(index_.validBlock(block), "beforeForward({}) of {} blocks", block, index_.numBlocks());
  gatherer_.acquire(block, block + 1);
}

void DeviceStage3::afterForward(int block) {
  DS_CHECK(index_.validBlock(block), "afterForward({}) of {} blocks", block, index_.numBlocks());
  // The last block's parameters stay for its backward, which comes next.
  if (block + 1 < index_.numBlocks()) gatherer_.release(block);
}

// The slot's zeroing is ordered after the previous block's bucket copies (one stream; CpuOps are
// synchronous), so one gradient slot serves every block.
void DeviceStage3::beforeBackward(int block) {
  DS_CHECK(index_.validBlock(block), "beforeBackward({}) of {} blocks", block, index_.numBlocks());
  gatherer_.acquire(block, block - 1);
  if (slotUsed_[size_t(block)] > 0)
    ops_.zero(gradSlot_.get(), slotUsed_[size_t(block)] * sizeof(float));
  const size_t world = size_t(world_);
  for (size_t p : index_.usedBy(block)) {
    if (tied(p) && !tiedHeld_[p]) {
      retireReadersOf(p);
      ops_.zero(gradOf(p), layout_.chunk(p) * world * sizeof(float));
      tiedHeld_[p] = 1;
    }
    table_.grad[p] = gradOf(p);
  }
}

void DeviceStage3::afterBackward(int block) {
  DS_CHECK(index_.validBlock(block), "afterBackward({}) of {} blocks", block, index_.numBlocks());
  gatherer_.release(block);
  for (const auto& bucket : plan_[size_t(block)]) issueBucket(bucket);
  for (size_t p : index_.usedBy(block))
    if (!tied(p)) table_.grad[p] = nullptr;
  for (size_t p : index_.completeAfter(block)) {
    tiedHeld_[p] = 0;
    table_.grad[p] = nullptr;
  }
}

// The parameters' gradients copied rank-major into a bucket (rank r's block: chunk r of each
// parameter, in order), reduce-scattered into the bucket's output. One rank: added directly.
void DeviceStage3::issueBucket(const std::vector<size_t>& params) {
  float* g = part_.grads;
  if (world_ == 1) {
    for (size_t p : params) {
      float* into = g + layout_.localOffset(p);
      ops_.residualForward(into, into, gradOf(p), layout_.chunk(p), DType::kF32);
    }
    return;
  }
  const int slot = takeBucket();
  const bool inPlace = direct(params);
  float* in = inPlace ? gradOf(params[0]) : bucketInBuf_[slot].as<float>();
  size_t pos = 0;
  for (int r = 0; r < world_; ++r)
    for (size_t p : params) {
      const size_t chunk = layout_.chunk(p);
      if (!inPlace) ops_.copy(in + pos, gradOf(p) + size_t(r) * chunk, chunk * sizeof(float));
      pos += chunk;
    }
  const size_t perRank = pos / size_t(world_);
  const comm::Device where = ops_.onDevice() ? comm::Device::kCuda : comm::Device::kCpu;
  comm::WorkPtr work = group_->reduceScatter(
      {in, pos, DType::kF32, where}, {bucketOutBuf_[slot].get(), perRank, DType::kF32, where},
      std::vector<size_t>(size_t(world_), perRank), comm::ReduceOp::kSum);
  tracer_.note(zero::TraceEvent::Kind::kBucketIssued, bucketNumber_);
  inFlight_.push_back({std::move(work), slot, params, bucketNumber_++, inPlace});
}

int DeviceStage3::takeBucket() {
  for (;;) {
    for (int s = 0; s < kBuckets; ++s)
      if (!bucketBusy_[s]) {
        bucketBusy_[s] = true;
        return s;
      }
    DS_CHECK(!inFlight_.empty(), "stage-3 bucket buffers busy with nothing in flight");
    retire(inFlight_.front());
    inFlight_.pop_front();
  }
}

// The add is enqueued after the host saw the collective complete; the next collective into the
// same output waits for it (NCCL's stream waits on the compute stream at issue).
void DeviceStage3::retire(InFlight& f) {
  tracer_.note(zero::TraceEvent::Kind::kBucketWaited, f.number, f.work->isCompleted());
  f.work->wait();
  const float* out = bucketOutBuf_[f.slot].as<float>();
  size_t from = 0;
  for (size_t p : f.params) {
    float* into = part_.grads + layout_.localOffset(p);
    ops_.residualForward(into, into, out + from, layout_.chunk(p), DType::kF32);
    from += layout_.chunk(p);
  }
  bucketBusy_[f.slot] = false;
}

void DeviceStage3::retireReadersOf(size_t param) {
  for (size_t i = 0; i < inFlight_.size(); ++i)
    if (inFlight_[i].direct && inFlight_[i].params[0] == param) {
      for (size_t k = 0; k <= i; ++k) {  // in issue order
        retire(inFlight_.front());
        inFlight_.pop_front();
      }
      return;
    }
}

void DeviceStage3::finish() {
  while (!inFlight_.empty()) {
    retire(inFlight_.front());
    inFlight_.pop_front();
  }
}

void DeviceStage3::refresh() {
  gatherer_.releaseAll();
  gatherer_.gatherPersistent();
}

size_t DeviceStage3::bufferBytes() const {
  size_t bytes = gatherer_.slotBytes() + gradSlot_.bytes() + tiedGrads_.bytes();
  for (int s = 0; s < kBuckets; ++s) bytes += bucketInBuf_[s].bytes() + bucketOutBuf_[s].bytes();
  return bytes;
}

}  // namespace ds::runtime
