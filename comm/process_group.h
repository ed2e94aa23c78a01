// ProcessGroup: the collective API the runtime and ZeRO use, over one Backend (gloo, mpi, nccl).
// Contract: every rank of the group issues the same collectives in the same order; buffers stay
// alive and untouched until the returned Work's wait() returns. Element counts need not be
// multiples of the group size. fp16/bf16 reductions accumulate in fp32.
// Thread-safety: one issuing thread at a time per group; Work may be waited on from any thread.
// Device buffers on a backend without device support (gloo, mpi) are staged through pinned host
// memory (comm/device_staging.h): such a call returns a completed Work.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "comm/store/store.h"
#include "comm/types.h"
#include "comm/work.h"

namespace ds::comm {

class Backend;
class DeviceStaging;

struct GroupOptions {
  std::string backend;                   // "gloo", "mpi", "nccl"; empty = default
  std::chrono::milliseconds timeout{0};  // 0 = ds::defaultTimeout()
  std::string hostAddr;                  // address this rank listens on ("" = MASTER_ADDR-side
                                         // interface; loopback for local jobs)
  bool sharedMemory = true;              // gloo: a group on one host uses comm/shm (unless
                                         // DS_COMM_SHM=0); false: the backend's own transport
};

class ProcessGroup {
 public:
  ProcessGroup(std::unique_ptr<Backend> backend);
  ~ProcessGroup();

  int rank() const;
  int size() const;
  const std::string& backendName() const;

  // In place: every rank ends with op over all ranks' buf.
  WorkPtr allreduce(BufferView buf, ReduceOp op = ReduceOp::kSum);
  // input holds `size()` consecutive blocks; block i has counts[i] elements (the shard layout
  // computed by the caller). output receives this rank's reduced block (counts[rank()] elems).
  WorkPtr reduceScatter(BufferView input, BufferView output, const std::vector<size_t>& counts,
                        ReduceOp op = ReduceOp::kSum);
  // input: this rank's block (counts[rank()] elements); output: all blocks concatenated.
  WorkPtr allgather(BufferView input, BufferView output, const std::vector<size_t>& counts);
  WorkPtr broadcast(BufferView buf, int root);
  WorkPtr reduce(BufferView buf, int root, ReduceOp op = ReduceOp::kSum);
  WorkPtr barrier();
  WorkPtr send(BufferView buf, int dstRank, int tag = 0);
  WorkPtr recv(BufferView buf, int srcRank, int tag = 0);

  // A subgroup of these ranks (ordered as given); collective over *this* group: every rank calls
  // it with the same list. Ranks not in the list get nullptr.
  std::unique_ptr<ProcessGroup> newSubgroup(const std::vector<int>& ranks);

  // Backend::mappedPeerBytes: what allreducing a registered buffer of bufferBytes adds to this
  // rank's resident set (peers' pages mapped in place; ZeRO's memory table lists it).
  size_t mappedPeerBytes(size_t bufferBytes) const;

 private:
  bool staged(const std::vector<BufferView>& views) const;  // device views, host-only backend

  std::unique_ptr<Backend> backend_;
  std::unique_ptr<DeviceStaging> staging_;
};

// Names of the backends compiled into this build ("gloo" always; "mpi", "nccl" when built).
std::vector<std::string> builtBackends();

}  // namespace ds::comm
