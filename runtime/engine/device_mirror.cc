// DeviceMirror (see device_mirror.h): the two layouts, the upload staging ring, the gradient
// slots and the lag-one consumption of the gradients. The host side of each copy (packing the
// staging, adding the gradients) runs over threads (zero/bulk_ops.h).
#include "runtime/engine/device_mirror.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "core/log.h"
#include "runtime/tensor/tensor_knobs.h"
#include "zero/bulk_ops.h"
#include "zero/zero_engine.h"

namespace ds::runtime {
namespace {

// The bytes of one element of the parameter copies the model reads.
const void* hostValue(const zero::ParamTable& host, size_t i, DType compute) {
  return compute == DType::kBF16 ? static_cast<const void*>(host.value16.at(i))
                                 : static_cast<const void*>(host.value.at(i));
}

}  // namespace

DeviceMirror::DeviceMirror(Ops& ops, const std::vector<zero::ParamInfo>& params, DType compute,
                           zero::BlockHooks& inner, std::function<zero::ParamTable&()> hostTable,
                           DeviceMirrorOptions options)
    : ops_(ops),
      params_(params),
      compute_(compute),
      inner_(inner),
      hostTable_(std::move(hostTable)),
      options_(options),
      es_(dtypeSize(compute)) {
  if (compute_ != DType::kF32 && compute_ != DType::kBF16)
    throw NotSupported(fmt::format("{}: device training computes in fp32 or bf16, not {}",
                                   ops_.name(), dtypeName(compute_)));
  for (const zero::ParamInfo& p : params_)
    if (p.backwardPart != 0)
      throw InternalError(fmt::format(
          "device mirror: parameter '{}' declares backward part {}, but the mirror reads a "
          "block's values one block ahead and calls no part hook; give it the params of a model "
          "without backward parts (Gpt2Model::dropBackwardParts)",
          p.name, p.backwardPart));
  layout();
  const bool win = options_.windowed;
  size_t resident = 0;
  for (size_t n : regionElems_) resident += n;
  values_ = OpsBuffer(ops_, (win ? 2 * slotElems_ : resident) * es_,
                      win ? "parameters (two blocks' slots)" : "parameters (device copy)");
  grads_ = OpsBuffer(ops_, 2 * slotElems_ * sizeof(float), "gradients (two blocks' slots)");
  for (int s = 0; s < 2; ++s) {
    valueSlots_[s].ready = ops_.newEvent();
    valueSlots_[s].free = ops_.newEvent();
    gradSlots_[s].host =
        PinnedBuffer(ops_, slotElems_ * sizeof(float), "gradient download staging (one block)");
    gradSlots_[s].computed = ops_.newEvent();
    gradSlots_[s].copied = ops_.newEvent();
    size_t up = win ? slotElems_ : 0;
    for (size_t n : regionElems_) up = std::max(up, n);
    staging_[s].host = PinnedBuffer(ops_, up * es_, "parameter upload staging (one block)");
    staging_[s].free = ops_.newEvent();
  }
  fence_ = ops_.newEvent();
  const size_t n = params_.size();
  table_.value.assign(n, nullptr);
  table_.value16.assign(n, nullptr);
  table_.grad.assign(n, nullptr);
  if (!win) {
    for (size_t i = 0; i < n; ++i) {
      char* at = static_cast<char*>(values_.get()) + offset_[i] * es_;
      if (compute_ == DType::kBF16) table_.value16[i] = reinterpret_cast<const bf16*>(at);
      else table_.value[i] = reinterpret_cast<float*>(at);
    }
  }
  entered_.assign(blocks_.size(), 0);
}

DeviceMirror::~DeviceMirror() {
  // The pinned buffers must outlive the copies that use them (a failed step may leave some).
  try {
    for (auto* slot : {&gradSlots_[0], &gradSlots_[1]})
      ops_.hostWait(*slot->copied, options_.copyTimeout, "a gradient download at shutdown");
    for (auto* st : {&staging_[0], &staging_[1]})
      ops_.hostWait(*st->free, options_.copyTimeout, "a parameter upload at shutdown");
    ops_.synchronize();
  } catch (const std::exception& e) {
    DS_LOG_WARN("engine", "device mirror: copies still in flight at shutdown: {}", e.what());
  }
  ops_.unregisterHost(registered_);
}

// Blocks: every parameter each block reads, packed into a slot. Regions (resident): parameter i
// belongs to the region of the first block that reads it; regions are laid out in block order.
void DeviceMirror::layout() {
  int numBlocks = 0;
  for (const auto& p : params_)
    for (int b : p.blocks) numBlocks = std::max(numBlocks, b + 1);
  blocks_.assign(size_t(numBlocks), {});
  regionParams_.assign(size_t(numBlocks), {});
  std::vector<int>& regionOf = regionOf_;
  regionOf.assign(params_.size(), -1);
  flatOffset_.assign(params_.size(), 0);
  for (size_t i = 0, flat = 0; i < params_.size(); flat += params_[i].numel, ++i)
    flatOffset_[i] = flat;
  for (size_t i = 0; i < params_.size(); ++i) {
    for (int b : params_[i].blocks) {
      Block& blk = blocks_[size_t(b)];
      if (std::find(blk.params.begin(), blk.params.end(), int(i)) != blk.params.end()) continue;
      blk.params.push_back(int(i));
      blk.packed.push_back(blk.elems);
      blk.elems += params_[i].numel;
    }
    if (!params_[i].blocks.empty()) {
      regionOf[i] = *std::min_element(params_[i].blocks.begin(), params_[i].blocks.end());
      regionParams_[size_t(regionOf[i])].push_back(int(i));
    }
  }
  for (const Block& blk : blocks_) slotElems_ = std::max(slotElems_, blk.elems);
  offset_.assign(params_.size(), 0);
  regionOffset_.assign(size_t(numBlocks), 0);
  regionElems_.assign(size_t(numBlocks), 0);
  size_t at = 0;
  for (size_t r = 0; r < size_t(numBlocks); ++r) {
    regionOffset_[r] = at;
    for (int i : regionParams_[r]) {
      offset_[size_t(i)] = at;
      at += params_[size_t(i)].numel;
    }
    regionElems_[r] = at - regionOffset_[r];
  }
  for (Block& blk : blocks_) {
    for (int i : blk.params) blk.regions.push_back(regionOf[size_t(i)]);
    std::sort(blk.regions.begin(), blk.regions.end());
    blk.regions.erase(std::unique(blk.regions.begin(), blk.regions.end()), blk.regions.end());
  }
  regionVersion_.assign(size_t(numBlocks), -1);
  regionReady_.clear();
  for (int r = 0; r < numBlocks; ++r) regionReady_.push_back(ops_.newEvent());
}

size_t DeviceMirror::pinnedBytes() const {
  return gradSlots_[0].host.bytes() + gradSlots_[1].host.bytes() + staging_[0].host.bytes() +
         staging_[1].host.bytes();
}

zero::MemoryReport DeviceMirror::memory(const zero::MemoryReport& engine) const {
  using zero::MemKind;
  using zero::MemPlace;
  zero::MemoryReport report = engine;
  for (auto& kind : report.bytes) {
    kind[int(MemPlace::kHost)] += kind[int(MemPlace::kDevice)];
    kind[int(MemPlace::kDevice)] = 0;
  }
  report.bytes[int(MemKind::kParams)][int(MemPlace::kDevice)] = valueBytes();
  report.bytes[int(MemKind::kGrads)][int(MemPlace::kDevice)] = gradBytes();
  report.bytes[int(MemKind::kBuffers)][int(MemPlace::kHost)] += pinnedBytes();
  return report;
}

void DeviceMirror::wait(const OpsEvent& event, int block, const char* what) {
  ops_.hostWait(event, options_.copyTimeout,
                fmt::format("block {}'s {} (device mirror, rank {})", block, what, options_.rank));
}

void DeviceMirror::callInnerBefore(int block, bool backward) {
  if (entered_[size_t(block)] != 0) return;
  if (backward) inner_.beforeBackward(block);
  else inner_.beforeForward(block);
  entered_[size_t(block)] = backward ? 2 : 1;
}

// Packs the host values of `params` into the next pinned staging buffer and queues ONE upload
// of `elems` elements to dst on the copy stream (after whatever the caller made it wait for).
void DeviceMirror::upload(void* dst, int block, const std::vector<int>& params, size_t elems) {
  Staging& st = staging_[nextStaging_];
  nextStaging_ ^= 1;
  wait(*st.free, block, "parameter staging (its previous upload)");
  const zero::ParamTable& host = hostTable_();
  char* out = st.host.as<char>();
  for (int i : params) {
    const zero::ParamInfo& info = params_[size_t(i)];
    const void* src = hostValue(host, size_t(i), compute_);
    if (src == nullptr)
      throw InternalError(
          fmt::format("device mirror: the engine holds no {} value of '{}' inside block {}",
                      dtypeName(compute_), info.name, block));
    zero::bulkCopyBytes(out, src, info.numel * es_);
    out += info.numel * es_;
  }
  ops_.uploadAsync(dst, st.host.get(), elems * es_);
  ops_.record(*st.free, OpsStream::kCopy);
  uploaded_ += elems * es_;
}

int DeviceMirror::stageWindow(int block) {
  for (int s = 0; s < 2; ++s)
    if (valueSlots_[s].block == block && valueSlots_[s].version == version_) return s;
  const int s = lastValueSlot_ ^ 1;  // the slot the block computing now does not use
  ValueSlot& slot = valueSlots_[s];
  ops_.streamWait(OpsStream::kCopy, *slot.free);  // its last reader's kernels have run
  upload(static_cast<char*>(values_.get()) + size_t(s) * slotElems_ * es_, block,
         blocks_[size_t(block)].params, blocks_[size_t(block)].elems);
  ops_.record(*slot.ready, OpsStream::kCopy);
  slot.block = block;
  slot.version = version_;
  return s;
}

void DeviceMirror::fenceOnce(int64_t version) {
  if (fenceVersion_ == version) return;  // the previous values may still be read by queued kernels
  ops_.record(*fence_, OpsStream::kCompute);
  ops_.streamWait(OpsStream::kCopy, *fence_);
  fenceVersion_ = version;
}

void DeviceMirror::stageRegion(int region) {
  if (regionVersion_[size_t(region)] == version_ || regionElems_[size_t(region)] == 0) return;
  fenceOnce(version_);
  upload(static_cast<char*>(values_.get()) + regionOffset_[size_t(region)] * es_, region,
         regionParams_[size_t(region)], regionElems_[size_t(region)]);
  ops_.record(*regionReady_[size_t(region)], OpsStream::kCopy);
  regionVersion_[size_t(region)] = version_;
}

void DeviceMirror::paramsReady(size_t flatOffset, size_t size) {
  DS_CHECK(!options_.windowed, "device mirror: paramsReady in the windowed (stage 3) layout");
  const int64_t next = version_ + 1;  // the version the coming invalidate() starts
  if (coverVersion_ != next) {
    regionCovered_.assign(regionElems_.size(), 0);
    coverVersion_ = next;
  }
  fenceOnce(next);
  const zero::ParamTable& host = hostTable_();
  const bool direct = registerHostValues(host);
  const size_t end = flatOffset + size;
  pieces_.clear();
  auto first = std::upper_bound(flatOffset_.begin(), flatOffset_.end(), flatOffset);
  for (size_t i = size_t(first - flatOffset_.begin()) - 1;
       i < params_.size() && flatOffset_[i] < end; ++i) {
    const size_t begin = std::max(flatOffset, flatOffset_[i]);
    const size_t stop = std::min(end, flatOffset_[i] + params_[i].numel);
    const int region = regionOf_[i];
    if (begin >= stop || region < 0) continue;
    const auto* src = static_cast<const char*>(hostValue(host, i, compute_));
    if (src == nullptr)
      throw InternalError(
          fmt::format("device mirror: the engine announced '{}' but holds no {} value of it",
                      params_[i].name, dtypeName(compute_)));
    const size_t skip = begin - flatOffset_[i];
    pieces_.push_back({offset_[i] + skip, src + skip * es_, stop - begin});
    size_t& covered = regionCovered_[size_t(region)];
    covered += stop - begin;
    DS_CHECK(covered <= regionElems_[size_t(region)], "device mirror: region {} announced twice",
             region);
    if (covered == regionElems_[size_t(region)]) {  // its event right after its last copy
      if (direct) uploadDirect(pieces_);
      else uploadPieces(pieces_);
      pieces_.clear();
      ops_.record(*regionReady_[size_t(region)], OpsStream::kCopy);
      regionVersion_[size_t(region)] = next;
    }
  }
  if (direct) uploadDirect(pieces_);
  else uploadPieces(pieces_);
}

// Once: when the engine's host values of every parameter form one run in flat order (stages 0-2
// keep one flat buffer), the Ops page-locks it. The copies then read the engine's memory: the
// engine writes a region again only in the next step's update, after that step's forward waited
// on the region's event and its backward on later copies of the same (in-order) copy stream, or
// in a load, which invalidates; the destructor synchronizes before unregistering. Afterwards,
// every call checks the run is still where it was registered, else stages.
bool DeviceMirror::registerHostValues(const zero::ParamTable& host) {
  const auto* base =
      params_.empty() ? nullptr : static_cast<const char*>(hostValue(host, 0, compute_));
  if (base == nullptr) return false;
  size_t bytes = 0;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (static_cast<const char*>(hostValue(host, i, compute_)) != base + bytes) return false;
    bytes += params_[i].numel * es_;
  }
  if (!registerTried_) {
    registerTried_ = true;
    if (ops_.registerHost(const_cast<char*>(base), bytes)) {
      registered_ = const_cast<char*>(base);
      registeredBytes_ = bytes;
    }
    DS_LOG_DEBUG("engine", "device mirror: the engine's host parameters ({:.1f} MiB) {}",
                 double(bytes) / 1048576.0,
                 registered_ ? "page-locked: uploads read them directly"
                             : "not page-locked: uploads go through pinned staging");
  }
  return registered_ != nullptr && base == registered_ && bytes == registeredBytes_;
}

// Straight from the registered host values: one copy per run contiguous on both sides.
void DeviceMirror::uploadDirect(const std::vector<Piece>& pieces) {
  for (size_t k = 0; k < pieces.size();) {
    size_t elems = pieces[k].elems, j = k + 1;
    for (; j < pieces.size() && pieces[j].dst == pieces[k].dst + elems &&
           pieces[j].src == pieces[k].src + elems * es_;
         ++j)
      elems += pieces[j].elems;
    ops_.uploadAsync(static_cast<char*>(values_.get()) + pieces[k].dst * es_, pieces[k].src,
                     elems * es_);
    uploaded_ += elems * es_;
    k = j;
  }
}

// Packs the pieces into the staging ring in order, one upload per run of pieces contiguous on
// the device within one staging buffer.
void DeviceMirror::uploadPieces(const std::vector<Piece>& pieces) {
  const size_t cap = staging_[0].host.bytes() / es_;
  Staging* st = nullptr;
  size_t used = 0, runStart = 0, runDst = 0, runElems = 0;
  auto flushRun = [&] {
    if (runElems == 0) return;
    ops_.uploadAsync(static_cast<char*>(values_.get()) + runDst * es_,
                     st->host.as<char>() + runStart * es_, runElems * es_);
    uploaded_ += runElems * es_;
    runStart = used;
    runElems = 0;
  };
  auto finishBuffer = [&] {
    flushRun();
    if (st != nullptr) ops_.record(*st->free, OpsStream::kCopy);
    st = nullptr;
  };
  for (const Piece& piece : pieces) {
    for (size_t done = 0; done < piece.elems;) {
      if (st == nullptr || used == cap) {
        finishBuffer();
        st = &staging_[nextStaging_];
        nextStaging_ ^= 1;
        ops_.hostWait(*st->free, options_.copyTimeout,
                      fmt::format("parameter staging of the optimizer-overlapped uploads (its "
                                  "previous upload; device mirror, rank {})",
                                  options_.rank));
        used = runStart = 0;
      }
      const size_t take = std::min(piece.elems - done, cap - used);
      if (runElems != 0 && runDst + runElems != piece.dst + done) flushRun();
      if (runElems == 0) runDst = piece.dst + done;
      zero::bulkCopyBytes(st->host.as<char>() + used * es_, piece.src + done * es_, take * es_);
      used += take;
      runElems += take;
      done += take;
    }
  }
  finishBuffer();
}

void DeviceMirror::stage(int block, bool backward) {
  callInnerBefore(block, backward);
  if (options_.windowed) (void)stageWindow(block);
  else
    for (int r : blocks_[size_t(block)].regions) stageRegion(r);
}

void DeviceMirror::enter(int block, bool backward) {
  if (block < 0 || size_t(block) >= blocks_.size()) return;
  if (!backward && pending_ >= 0) consume(pending_);  // defensive: a backward left one behind
  stage(block, backward);
  const Block& blk = blocks_[size_t(block)];
  if (options_.windowed) {
    const int s = stageWindow(block);  // found: staged above or earlier
    ops_.streamWait(OpsStream::kCompute, *valueSlots_[s].ready);
    char* base = static_cast<char*>(values_.get()) + size_t(s) * slotElems_ * es_;
    for (size_t k = 0; k < blk.params.size(); ++k) {
      char* at = base + blk.packed[k] * es_;
      const size_t i = size_t(blk.params[k]);
      if (compute_ == DType::kBF16) table_.value16[i] = reinterpret_cast<const bf16*>(at);
      else table_.value[i] = reinterpret_cast<float*>(at);
    }
    lastValueSlot_ = s;
  } else {
    for (int r : blk.regions) ops_.streamWait(OpsStream::kCompute, *regionReady_[size_t(r)]);
  }
  if (backward) {
    const int g = nextGradSlot_;
    nextGradSlot_ ^= 1;
    GradSlot& slot = gradSlots_[g];
    DS_CHECK(g != pending_, "device mirror: gradient slot {} of block {} is still pending", g,
             slot.block);
    ops_.streamWait(OpsStream::kCompute, *slot.copied);  // its previous block's download ran
    float* base = grads_.as<float>() + size_t(g) * slotElems_;
    ops_.zero(base, blk.elems * sizeof(float));
    for (size_t k = 0; k < blk.params.size(); ++k)
      table_.grad[size_t(blk.params[k])] = base + blk.packed[k];
    slot.block = block;
    activeGrad_ = g;
  }
  // Prefetch: the next block's engine hooks and upload, while this block computes.
  const int next = backward ? block - 1 : block + 1;
  if (next >= 0 && size_t(next) < blocks_.size()) stage(next, backward);
}

void DeviceMirror::leave(int block, bool backward) {
  if (block < 0 || size_t(block) >= blocks_.size()) return;
  const Block& blk = blocks_[size_t(block)];
  if (options_.windowed) {
    for (int s = 0; s < 2; ++s)
      if (valueSlots_[s].block == block) ops_.record(*valueSlots_[s].free, OpsStream::kCompute);
    for (int i : blk.params) {
      table_.value[size_t(i)] = nullptr;
      table_.value16[size_t(i)] = nullptr;
    }
  }
  if (!backward) {
    inner_.afterForward(block);
    entered_[size_t(block)] = 0;
    return;
  }
  DS_CHECK(activeGrad_ >= 0 && gradSlots_[activeGrad_].block == block,
           "device mirror: afterBackward({}) without its beforeBackward", block);
  GradSlot& slot = gradSlots_[activeGrad_];
  for (int i : blk.params) table_.grad[size_t(i)] = nullptr;
  ops_.record(*slot.computed, OpsStream::kCompute);
  ops_.streamWait(OpsStream::kCopy, *slot.computed);
  ops_.downloadAsync(slot.host.get(), grads_.as<float>() + size_t(activeGrad_) * slotElems_,
                     blk.elems * sizeof(float));
  ops_.record(*slot.copied, OpsStream::kCopy);
  downloaded_ += blk.elems * sizeof(float);
  const int landed = activeGrad_;
  activeGrad_ = -1;
  if (pending_ >= 0) consume(pending_);  // the previous block, while this one computes
  pending_ = landed;
  if (block == 0) consume(pending_);  // backward is over: nothing left to overlap with
}

void DeviceMirror::addGrads(const GradSlot& slot) {
  zero::ParamTable& host = hostTable_();
  const Block& blk = blocks_[size_t(slot.block)];
  for (size_t k = 0; k < blk.params.size(); ++k) {
    const size_t i = size_t(blk.params[k]);
    float* dst = host.grad.at(i);
    if (dst == nullptr)
      throw InternalError(
          fmt::format("device mirror: the engine holds no gradient of '{}' inside block {}",
                      params_[i].name, slot.block));
    zero::bulkAdd(dst, slot.host.as<const float>() + blk.packed[k], params_[i].numel);
  }
}

void DeviceMirror::consume(int g) {
  GradSlot& slot = gradSlots_[g];
  pending_ = -1;
  wait(*slot.copied, slot.block, "gradients (device -> pinned host)");
  addGrads(slot);
  inner_.afterBackward(slot.block);
  entered_[size_t(slot.block)] = 0;
}

void DeviceMirror::beforeForward(int block) { enter(block, false); }
void DeviceMirror::afterForward(int block) { leave(block, false); }
void DeviceMirror::beforeBackward(int block) { enter(block, true); }
void DeviceMirror::afterBackward(int block) { leave(block, true); }

size_t connectOptimizerOverlap(zero::ZeroEngine& engine, DeviceMirror& mirror) {
  if (mirror.windowed() || !knobBoolOrDefault(knobs::kOffloadOverlap)) return 0;
  const auto tile = size_t(knobIntOrDefault(knobs::kOffloadOverlapTile));
  engine.setParamsReady([m = &mirror](size_t offset, size_t size) { m->paramsReady(offset, size); },
                        tile);
  return tile;
}

}  // namespace ds::runtime
