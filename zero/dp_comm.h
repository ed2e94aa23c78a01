// DpComm: the data-parallel collectives ZeRO needs, over a nullable comm::ProcessGroup (nullptr =
// one rank: every collective is a local copy or a no-op). Not a backend: it only shapes calls.
// Invariant: every rank issues the same calls in the same order from one thread; buffers stay
// untouched until the returned Work completed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "comm/types.h"
#include "comm/work.h"

namespace ds::comm {
class ProcessGroup;
}

namespace ds::zero {

class DpComm {
 public:
  explicit DpComm(comm::ProcessGroup* group);
  ~DpComm();
  DpComm(DpComm&&) noexcept;
  DpComm& operator=(DpComm&&) noexcept;

  // Collective over this group: splits it into consecutive groups of `size` ranks (size divides
  // world) and returns this rank's, which owns its process group (ZeRO++ hpZ's secondary
  // partition: the ranks of one host when size = ranks per host).
  DpComm consecutiveSubgroup(int size);
  // Collective: the groups of ranks with equal rank % stride ({i, i+stride, ...}), this rank's
  // (MiCS's replication group: the ranks holding the same shard in every shard group).
  DpComm stridedSubgroup(int stride);
  int rank() const { return rank_; }
  int world() const { return world_; }
  bool single() const { return group_ == nullptr || world_ == 1; }

  // In-place sum over ranks.
  comm::WorkPtr allreduceSum(float* buf, size_t count);
  // input: world consecutive blocks of counts[r] elements; output: this rank's summed block.
  comm::WorkPtr reduceScatterSum(const float* input, float* output,
                                 const std::vector<size_t>& counts);
  // ZeRO++ qgZ: the same sum with every other rank's block sent as block int8 (block_quant.h)
  // over point-to-point messages, a quarter of the bytes; this rank's own block is added
  // exactly, and the blocks are summed in rank order when the Work is first waited for (the
  // messages fly meanwhile). input stays untouched until then, as for every call here.
  comm::WorkPtr reduceScatterSumQuantized(const float* input, float* output, size_t perRank);
  // input: this rank's block; output: all blocks concatenated (elements of dtype).
  comm::WorkPtr allgather(const void* input, void* output, const std::vector<size_t>& counts,
                          DType dtype);
  // Every rank contributes one double; returns all of them in rank order (blocking).
  std::vector<double> allgatherDouble(double value);
  // What allreducing a registered buffer of `bytes` adds to this rank's resident set
  // (comm::ProcessGroup::mappedPeerBytes; 0 on one rank).
  size_t mappedPeerBytes(size_t bytes) const;

 private:
  comm::ProcessGroup* group_;
  std::unique_ptr<comm::ProcessGroup> owned_;  // subgroups only
  int rank_ = 0, world_ = 1;
};

// Waits with ds::defaultTimeout(); a null Work is a no-op.
void waitWork(const comm::WorkPtr& work);

}  // namespace ds::zero
