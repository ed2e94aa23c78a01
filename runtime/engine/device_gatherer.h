// DeviceGatherer: the device engine's stage-3 gathered parameters. Each block's non-persistent
// parameters are all-gathered (one collective per parameter, rank-major chunks as
// zero/param_gatherer) into one of two fixed gather slots before the block runs; the next block's
// are issued ahead within stage3_prefetch_bucket_size and stage3_max_live_parameters (the host
// rule; one slot when they allow no prefetch); a slot is freed after its block; parameters <=
// stage3_param_persistence_threshold stay gathered in a buffer of their own. Not the gradient path
// (DeviceStage3) nor the partition's owner (DeviceEngine). Invariants: a slot holds one block's
// copies at fixed offsets (a parameter read by two consecutive blocks is gathered into each block's
// slot); table value/value16[p] is non-null while a complete copy of p is published; a slot is
// rewritten only after the kernels that read it (NCCL's stream waits on an event of the compute
// stream at each issue); a block's kernels run after its gathers (the compute stream waits on the
// NCCL Work's event, or the host on the Work, comm::Work::deviceEvent). Not thread-safe: the
// training thread only.
#pragma once

#include <cstddef>
#include <vector>

#include "comm/work.h"
#include "runtime/tensor/ops.h"
#include "zero/engine_trace.h"
#include "zero/param_index.h"
#include "zero/partition.h"
#include "zero/zero_options.h"

namespace ds::comm {
class ProcessGroup;
}

namespace ds::runtime {

class DeviceGatherer {
 public:
  // part: this rank's partition in the model dtype (zopts.compute), [layout.localSize()], owned
  // by the caller and outliving this. group == nullptr: one rank (gathers are copies).
  DeviceGatherer(Ops& ops, const zero::ParamIndex& index, const zero::Stage3Layout& layout,
                 comm::ProcessGroup* group, const zero::ZeroOptions& zopts, zero::ParamTable& table,
                 zero::Tracer& tracer, const void* part);
  ~DeviceGatherer();  // waits for the gathers still in flight (they write our slots)
  DeviceGatherer(const DeviceGatherer&) = delete;
  DeviceGatherer& operator=(const DeviceGatherer&) = delete;

  // block's parameters gathered and published; `ahead` (may be invalid) prefetched meanwhile.
  void acquire(int block, int ahead);
  void release(int block);  // frees block's slot (waits for gathers still in flight)
  void releaseAll();
  void gatherPersistent();  // (re)gathers every persistent parameter, waits: after an update

  size_t slotBytes() const { return slots_.bytes(); }
  size_t persistentBytes() const { return persistent_.bytes(); }
  size_t peakLiveElems() const { return peakLive_; }

 private:
  struct Copy {                    // one parameter of one block's slot
    size_t param = 0, offset = 0;  // offset in the slot (elements)
    comm::WorkPtr work;
    bool issued = false, waited = false;
  };

  int takeSlot(int block, bool evict);  // a free slot for block, or -1
  void issue(int block, Copy& copy);
  void waitGather(Copy& copy);  // before a block's kernels: on the device, or on the host
  void* slotAt(int slot, size_t offset) const;
  void gatherInto(size_t param, void* out, comm::WorkPtr* work);  // work null: single rank
  void publish(size_t param, void* at);
  bool published(size_t param, const void* at) const;
  size_t fullSize(size_t param) const { return layout_.chunk(param) * size_t(world_); }

  Ops& ops_;
  const zero::ParamIndex& index_;
  const zero::Stage3Layout& layout_;
  comm::ProcessGroup* group_;
  const zero::ZeroOptions& zopts_;
  zero::ParamTable& table_;
  zero::Tracer& tracer_;
  const void* part_;
  DType dt_;
  size_t elem_;
  int world_ = 1;
  std::vector<char> persistentParam_;      // [numParams]
  std::vector<size_t> persistentOffset_;   // [numParams] elements in persistent_
  std::vector<std::vector<Copy>> blocks_;  // [block] its non-persistent params, slot layout
  std::vector<int> slotOf_;                // [block] slot held, or -1
  std::vector<int> blockIn_;               // [slot] block held, or -1
  size_t slotElems_ = 0;
  OpsBuffer slots_;                 // [2][slotElems_] model dtype
  OpsBuffer persistent_;            // the persistent parameters, gathered
  size_t live_ = 0, peakLive_ = 0;  // gathered non-persistent elements
};

}  // namespace ds::runtime
