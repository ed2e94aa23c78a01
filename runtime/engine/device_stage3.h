// DeviceStage3: ZeRO stage 3's hooks on the device engine. Parameters: a block's are gathered
// (DeviceGatherer) before its forward and again before its backward, the next block's issued
// ahead. Gradients: the model adds a block's into a zeroed gradient slot (a parameter read by
// several blocks, a tied one, into a buffer of its own that lives from its last block's backward
// to its first's); after the block's backward the gradients it completed are copied rank-major
// into a bucket of at most reduce_bucket_size elements (one bucket never spans blocks; a tied
// parameter's is its own, reduce-scattered from its buffer without a copy) and
// reduce-scattered, every micro-step, as zero::BlockedStage; a bucket's result is added into the
// fp32 gradient partition once its collective completed (when its bucket buffer is needed again,
// or in finish()). Not the partition's owner nor the optimizer (DeviceEngine). Invariants: the
// partition is zero::Stage3Layout's (per parameter, chunk = ceil(numel / world)), so checkpoints
// move to and from the host engine; a gradient is reduced once per micro-step, after its last
// contribution; two bucket buffers, waited for in issue order. Not thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "comm/work.h"
#include "runtime/engine/device_gatherer.h"
#include "runtime/tensor/ops.h"
#include "zero/engine_trace.h"
#include "zero/param_index.h"
#include "zero/partition.h"
#include "zero/zero_options.h"

namespace ds::runtime {

class DeviceStage3 {
 public:
  // Where this rank's partition lives (owned by the caller, outliving this), both
  // [localSize(params, world)] elements: the parameters in the model dtype (the gathers' input)
  // and the fp32 gradients (accumulated here).
  struct Partition {
    const void* params = nullptr;
    float* grads = nullptr;
  };
  static size_t localSize(const std::vector<zero::ParamInfo>& params, int world);

  // Throws ConfigError for a parameter without a block (stage 3 gathers per block).
  DeviceStage3(Ops& ops, const std::vector<zero::ParamInfo>& params, comm::ProcessGroup* group,
               const zero::ZeroOptions& zopts, zero::ParamTable& table, zero::Tracer& tracer,
               Partition part);
  ~DeviceStage3();  // waits for the buckets still in flight (they read and write our buffers)
  DeviceStage3(const DeviceStage3&) = delete;
  DeviceStage3& operator=(const DeviceStage3&) = delete;

  const zero::Stage3Layout& layout() const { return layout_; }

  void beforeForward(int block);
  void afterForward(int block);
  void beforeBackward(int block);
  void afterBackward(int block);

  void finish();   // step(): waits every bucket in issue order, adds it into the gradients
  void refresh();  // after the optimizer or a load: gathered copies dropped, persistent regathered

  size_t bufferBytes() const;  // gather slots, gradient slot, tied gradients, bucket buffers
  size_t persistentBytes() const { return gatherer_.persistentBytes(); }
  size_t slotBytes() const { return gatherer_.slotBytes(); }

 private:
  struct InFlight {
    comm::WorkPtr work;
    int slot = 0;
    std::vector<size_t> params;
    int64_t number = 0;
    bool direct = false;  // reads the tied parameter's own gradient buffer, not a bucket input
  };

  bool tied(size_t param) const { return tiedOffset_[param] != kNone; }
  // A bucket of one tied parameter: its buffer is already rank-major (chunk r at r * chunk) and
  // lives until the next micro-step, so it is reduce-scattered in place of a bucket input.
  bool direct(const std::vector<size_t>& bucket) const {
    return bucket.size() == 1 && tied(bucket[0]);
  }
  void retireReadersOf(size_t param);  // before param's tied buffer is zeroed again
  float* gradOf(size_t param) const;   // where the model adds param's gradient [chunk * world]
  void issueBucket(const std::vector<size_t>& params);
  int takeBucket();          // a free bucket buffer, retiring the oldest bucket when none is
  void retire(InFlight& f);  // wait, then add the reduced block into the gradient partition

  static constexpr size_t kNone = ~size_t(0);
  Ops& ops_;
  comm::ProcessGroup* group_;
  const zero::ZeroOptions& zopts_;
  zero::ParamTable& table_;
  zero::Tracer& tracer_;
  Partition part_;
  int world_ = 1;
  zero::ParamIndex index_;
  zero::Stage3Layout layout_;
  DeviceGatherer gatherer_;
  // Gradients during backward: [slotOffset_[p]] in gradSlot_ for a parameter of one block,
  // [tiedOffset_[p]] in tiedGrads_ for one of several blocks (tiedHeld_: zeroed this micro-step).
  std::vector<size_t> slotOffset_, tiedOffset_;
  std::vector<char> tiedHeld_;
  std::vector<size_t> slotUsed_;  // [block] elements of gradSlot_ its parameters use
  OpsBuffer gradSlot_, tiedGrads_;
  // Buckets: plan_[block] = the buckets its backward issues; two buffers, each [bucketIn_]
  // input (rank-major; direct buckets need none) and [bucketOut_] output.
  std::vector<std::vector<std::vector<size_t>>> plan_;
  static constexpr int kBuckets = 2;
  size_t bucketIn_ = 0, bucketOut_ = 0;
  OpsBuffer bucketInBuf_[kBuckets], bucketOutBuf_[kBuckets];
  bool bucketBusy_[kBuckets] = {};
  std::deque<InFlight> inFlight_;
  int64_t bucketNumber_ = 0;
};

}  // namespace ds::runtime
