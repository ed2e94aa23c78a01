// ParamGatherer: stage 3's gathered parameters: allgathers a block's params before use, prefetches
// the next block's (stage3_prefetch_bucket_size, stage3_max_live_parameters), starts nvme
// read-aheads and releases copies after use; params <= stage3_param_persistence_threshold stay.
// zero_quantized_weights (ZeRO++ qwZ): each rank sends its chunk as block int8 and every rank,
// itself included, uses the dequantized values, so the gathered copies agree across ranks.
// Not the gradient path. Invariant: table.value/value16[p] is non-null exactly while p's
// gathered copy is complete and held. A rowSharded param (param_table.h) is never gathered nor
// released: the stage points the table at this rank's rows once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "comm/work.h"
#include "zero/buffer_pool.h"
#include "zero/stage.h"

namespace ds::zero {

class ParamStore;
class Stage3Layout;

class ParamGatherer {
 public:
  ParamGatherer(const StageContext& ctx, const Stage3Layout& layout, ParamStore& store,
                BufferPool<float>& pool32);

  void ensureGathered(size_t param);  // issues the allgather unless gathered or gathering
  void waitGathered(size_t param);    // publishes the copy in the table
  // Within the prefetch and live budgets; part >= 0: only block's params of that backward part.
  void prefetch(int block, int part = -1);
  void readAhead(int block);   // nvme: reads of block's params not yet gathering
  void release(size_t param);  // no-op for persistent params
  void releaseAll();
  // Releases block's params unless nextBlock (-1 = none) uses them.
  void releaseAfter(int block, int nextBlock);
  void gatherPersistent();  // (re)gathers every persistent parameter, waits
  // zero_hpz_partition_size (ZeRO++ hpZ): `secondary` is this rank's group of k consecutive
  // ranks (one host); each forward gather leaves this rank's 1/k of the full copy, and backward
  // gathers from those pieces inside the group instead of over the whole world.
  void setSecondary(DpComm* secondary);
  void setBackward(bool backward) { backward_ = backward; }

  bool issued(size_t param) const { return gathering_[param] || held(param); }
  bool persistent(size_t param) const { return persistent_[param]; }
  size_t peakLiveElems() const { return peakLiveElems_; }
  void addPipeline(PipelineState& state);

 private:
  bool held(size_t param) const {
    return ctx_.table.value[param] != nullptr || ctx_.table.value16[param] != nullptr;
  }
  size_t fullSize(size_t param) const;
  bool rowSharded(size_t param) const;
  bool usesSecondary(size_t param) const;
  void gatherSecondary(size_t param);
  void keepSecondary(size_t param);
  bool quantized() const;

  StageContext ctx_;
  const Stage3Layout& layout_;
  ParamStore& store_;
  BufferPool<float>& pool32_;
  BufferPool<uint16_t> pool16_;
  bool half_;
  std::vector<std::vector<float>> live32_;  // gathered full params (chunk*world elems)
  std::vector<std::vector<uint16_t>> live16_;
  std::vector<std::vector<uint8_t>> packed_;  // qwZ: the gathered block-int8 chunks in flight
  std::vector<comm::WorkPtr> work_;           // in-flight gather per param
  std::vector<char> gathering_;               // gather issued, not yet waited
  std::vector<char> persistent_;
  size_t liveElems_ = 0, peakLiveElems_ = 0;  // non-persistent gathered elements
  DpComm* secondary_ = nullptr;               // hpZ group, or null
  bool backward_ = false;
  std::vector<std::vector<char>> secondaryCopy_;  // hpZ: this rank's piece of each param
  std::vector<char> fromSecondary_;               // the gather in flight is the hpZ one
};

}  // namespace ds::zero
