// Backend: the interface one communication library implements (gloo, mpi, nccl). ProcessGroup
// forwards to it. Default bodies throw NotSupported, so a backend may start small.
// Contract: every rank calls collectives in the same order with matching arguments; buffers stay
// alive and untouched until the returned Work completes. Issued from one thread at a time.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "comm/types.h"
#include "comm/work.h"

namespace ds::comm {

class Backend {
 public:
  virtual ~Backend() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const std::string& name() const = 0;
  virtual bool supports(Device d) const { return d == Device::kCpu; }

  virtual WorkPtr allreduce(BufferView buf, ReduceOp op);
  virtual WorkPtr reduceScatter(BufferView input, BufferView output,
                                const std::vector<size_t>& counts, ReduceOp op);
  virtual WorkPtr allgather(BufferView input, BufferView output, const std::vector<size_t>& counts);
  virtual WorkPtr broadcast(BufferView buf, int root);
  virtual WorkPtr reduce(BufferView buf, int root, ReduceOp op);
  virtual WorkPtr barrier();
  virtual WorkPtr send(BufferView buf, int dstRank, int tag);
  virtual WorkPtr recv(BufferView buf, int srcRank, int tag);

  // A backend of the same kind over `ranks` (ordered as given); every rank of this group calls
  // it with the same list, in the same order as its collectives. Non-members get nullptr.
  virtual std::unique_ptr<Backend> newSubgroup(const std::vector<int>& ranks);

  // Bytes of the other members' buffers this rank maps, and so counts in its resident set, when
  // every member allreduces a registered buffer (comm/shared_host_buffer.h) of `bufferBytes`
  // over this group: 0 where collectives copy instead (the shared-memory layer says otherwise).
  virtual size_t mappedPeerBytes(size_t /*bufferBytes*/) const { return 0; }

 protected:
  [[noreturn]] void notSupported(const char* what) const;
};

}  // namespace ds::comm
