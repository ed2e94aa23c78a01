// DeviceMirror: ZeRO on the host, compute on the device, overlapped (ZeRO-Offload's pipeline). A
// BlockHooks decorator between a model that runs on an Ops device (runtime/model/ops_gpt2) and
// the host ZeroEngine, so every ZeRO stage and offload the host engine has trains on the GPU
// unchanged, with the CPU optimizer. Parameters go up and gradients come back one block at a time
// on the Ops copy stream (ops.h), through pinned staging, while the compute stream runs:
//  - gradients: each block's backward writes into one of two block-sized device gradient slots;
//    after its kernels are queued, ONE async copy streams the slot into pinned memory, and the
//    block is consumed one block later (lag-one: the host adds it into the engine's gradients and
//    calls the engine's afterBackward, which reduces/offloads its buckets) while the device
//    computes the next block; the last block (block 0) is drained before backward returns;
//  - parameters, resident layout (stages 0-2 with offload): one device copy of every parameter,
//    laid out by the first block that reads each one so every block uploads ONE contiguous
//    region, once per optimizer step (before its forward; block b+1's while b computes);
//  - parameters, resident layout, overlapped with the optimizer (paramsReady; ZeRO-Offload's
//    sub-group overlap): the engine announces each optimizer tile's flat region as soon as its
//    host values are final; the mirror queues its upload at once, from the engine's own buffer
//    page-locked in place (Ops::registerHost) or else packed into pinned staging,
//    so the copies run while the CPU optimizer updates the next tiles; a region covered whole by
//    the announcements for the next version is not uploaded again before its forward, whose
//    compute merely waits on the region's event;
//  - parameters, windowed layout (stage 3, ZeRO-Infinity's parameter offload): two block-sized
//    slots (double buffer); block b+1's parameters upload into one while b computes from the
//    other, in forward and in backward; device parameter bytes are two blocks', not the model's.
// The engine's hooks therefore run ahead and behind the model's: its before*(b+1) is called while
// block b is in flight (to read b+1's host parameters early) and its afterBackward(b) one block
// late, always in the model's block order, each exactly once per pass.
// The params must declare no backward parts (zero/param_table.h): the mirror calls the engine's
// beforeBackward(b-1) while b runs, before any part hook could; OpsGpt2Model drops them.
// Not an owner of the engine. Not thread-safe (the training thread calls the hooks).
// Invariants: table() holds device pointers only; in windowed mode a block's values, and in both
// modes its gradients, are non-null only between its before* and after* hooks; a gradient slot
// is zero when a block's backward starts; every block's gradients reach the engine exactly once
// per backward, in order, before backward returns; invalidate() must follow every change of the
// host parameters.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/dtype.h"
#include "runtime/tensor/ops.h"
#include "zero/engine_types.h"
#include "zero/param_table.h"

namespace ds::zero {
class ZeroEngine;
}

namespace ds::runtime {

struct DeviceMirrorOptions {
  bool windowed = false;  // stage 3: two block-sized parameter slots instead of every parameter
  // The longest the host waits for one block's copy (or the compute before it); the timeout's
  // message names the block, the direction and the rank.
  std::chrono::milliseconds copyTimeout = std::chrono::minutes(5);
  int rank = 0;  // for messages
};

class DeviceMirror : public zero::BlockHooks {
 public:
  // hostTable() returns the engine's table, valid inside the engine's hooks of a block.
  DeviceMirror(Ops& ops, const std::vector<zero::ParamInfo>& params, DType compute,
               zero::BlockHooks& inner, std::function<zero::ParamTable&()> hostTable,
               DeviceMirrorOptions options = {});
  ~DeviceMirror() override;  // waits (bounded) for copies still reading or writing its buffers
  DeviceMirror(const DeviceMirror&) = delete;
  DeviceMirror& operator=(const DeviceMirror&) = delete;

  zero::ParamTable& table() { return table_; }  // device pointers, for the model
  void invalidate() { ++version_; }             // host params changed: upload again
  // Resident layout only (zero::ZeroEngine::setParamsReady's listener): the host parameters of
  // the engine's flat [flatOffset, flatOffset + size) (the params' concatenation) hold the values
  // of the version the next invalidate() starts; queues their upload now on the copy stream. A
  // region not covered whole before that invalidate() uploads at its first forward as usual.
  void paramsReady(size_t flatOffset, size_t size);

  void beforeForward(int block) override;
  void afterForward(int block) override;
  void beforeBackward(int block) override;
  void afterBackward(int block) override;

  bool windowed() const { return options_.windowed; }
  size_t valueBytes() const { return values_.bytes(); }  // device parameter bytes held
  size_t gradBytes() const { return grads_.bytes(); }    // device gradient bytes held
  size_t pinnedBytes() const;                            // page-locked host staging
  size_t bytesUploaded() const { return uploaded_; }     // since construction (tests, logs)
  bool uploadsFromHost() const { return registered_ != nullptr; }  // paramsReady: no staging
  size_t bytesDownloaded() const { return downloaded_; }
  size_t largestBlockElems() const { return slotElems_; }  // the slots' size (elements)
  // This rank's memory with the mirror: all the host engine holds is host memory (its "device"
  // column moves to host; nvme stays), the device holds the mirror's parameters and gradient
  // slots and no optimizer state, and the pinned staging is a host buffer.
  zero::MemoryReport memory(const zero::MemoryReport& engine) const;

 private:
  struct Block {
    std::vector<int> params;     // parameter indices it reads, in table order
    std::vector<size_t> packed;  // [k] element offset of params[k] in a block slot
    size_t elems = 0;
    std::vector<int> regions;  // resident: the regions (first-reader blocks) of its params
  };
  struct ValueSlot {  // windowed: one block's parameters
    int block = -1;
    int64_t version = -1;
    std::unique_ptr<OpsEvent> ready;  // copy stream: the upload into it has landed
    std::unique_ptr<OpsEvent> free;   // compute: the last kernel reading it is queued before
  };
  struct GradSlot {  // one block's gradients, on the device and in pinned memory
    int block = -1;
    PinnedBuffer host;
    std::unique_ptr<OpsEvent> computed;  // compute: the block's backward is queued before
    std::unique_ptr<OpsEvent> copied;    // copy stream: the download has landed in `host`
  };
  struct Staging {  // pinned parameter staging for one upload
    PinnedBuffer host;
    std::unique_ptr<OpsEvent> free;  // copy stream: the upload reading it has finished
  };

  void layout();
  void callInnerBefore(int block, bool backward);
  // Enters the engine's hooks of block and queues its parameter upload unless already there.
  void stage(int block, bool backward);
  int stageWindow(int block);  // windowed: the slot that holds (or now receives) block
  void stageRegion(int region);
  void upload(void* dst, int block, const std::vector<int>& params, size_t elems);
  struct Piece {  // paramsReady: elems host elements at src for values_ element dst
    size_t dst;
    const char* src;
    size_t elems;
  };
  void uploadPieces(const std::vector<Piece>& pieces);
  void uploadDirect(const std::vector<Piece>& pieces);  // from registered host memory
  bool registerHostValues(const zero::ParamTable& host);
  void fenceOnce(int64_t version);  // the copy stream waits for compute's readers, once per version
  void enter(int block, bool backward);
  void leave(int block, bool backward);
  void consume(int slot);  // the lag-one step: add a landed gradient slot into the engine's
  void addGrads(const GradSlot& slot);
  void wait(const OpsEvent& event, int block, const char* what);

  Ops& ops_;
  const std::vector<zero::ParamInfo>& params_;
  DType compute_;
  zero::BlockHooks& inner_;
  std::function<zero::ParamTable&()> hostTable_;
  DeviceMirrorOptions options_;
  size_t es_;  // bytes per parameter element on the device
  std::vector<Block> blocks_;
  size_t slotElems_ = 0;  // the largest block's elements
  // Resident: param i at element offset_[i] of values_, grouped by region (first reader).
  std::vector<size_t> offset_;
  std::vector<size_t> flatOffset_;  // param i's offset in the engine's flat space
  std::vector<int> regionOf_;       // param i's region (-1: read by no block)
  std::vector<size_t> regionOffset_, regionElems_;
  std::vector<std::vector<int>> regionParams_;
  std::vector<int64_t> regionVersion_;
  std::vector<std::unique_ptr<OpsEvent>> regionReady_;
  std::unique_ptr<OpsEvent> fence_;  // compute, recorded before the first upload of a version
  int64_t fenceVersion_ = -1;
  std::vector<size_t> regionCovered_;  // paramsReady: elements announced for coverVersion_
  int64_t coverVersion_ = -1;
  std::vector<Piece> pieces_;  // paramsReady's scratch
  // paramsReady: the engine's host values, when one contiguous run in flat order that the Ops
  // page-locked (registerHost), are uploaded from where they are, without staging.
  bool registerTried_ = false;
  char* registered_ = nullptr;
  size_t registeredBytes_ = 0;
  OpsBuffer values_, grads_;  // grads_: two gradient slots of slotElems_ floats
  ValueSlot valueSlots_[2];
  int lastValueSlot_ = 1;
  GradSlot gradSlots_[2];
  int nextGradSlot_ = 0;
  int activeGrad_ = -1;  // the gradient slot of the block in backward
  int pending_ = -1;     // the gradient slot downloaded but not yet consumed
  Staging staging_[2];
  int nextStaging_ = 0;
  std::vector<int8_t> entered_;  // [block] 0, or 1/2: the engine's beforeForward/Backward called
  zero::ParamTable table_;
  int64_t version_ = 0;
  size_t uploaded_ = 0, downloaded_ = 0;
};

// Connects the engine's optimizer tiles to the mirror's uploads (ZeroEngine::setParamsReady ->
// paramsReady) when DS_OFFLOAD_OVERLAP (default on) allows and the layout is resident, with
// DS_OFFLOAD_OVERLAP_TILE elements per tile; returns the tile, or 0 when not connected.
size_t connectOptimizerOverlap(zero::ZeroEngine& engine, DeviceMirror& mirror);

}  // namespace ds::runtime
