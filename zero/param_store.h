// ParamStore: where stage 3 keeps this rank's parameter partition: in memory (offload_param none
// or cpu) or in an nvme swap file with read-ahead (offload_param nvme); stage 3's offload
// variants differ only here. Not the gathered copies (ParamGatherer) nor the optimizer master.
// Invariant: offsets/counts are elements of the local partition; values arrive as fp32 and are
// stored in the model dtype.
#pragma once

#include <cstddef>
#include <memory>

#include "zero/stage.h"

namespace ds::zero {

class ParamStore {
 public:
  virtual ~ParamStore() = default;

  // Local [offset, offset + count) from fp32 values.
  virtual void write(size_t offset, size_t count, const float* values) = 0;
  // Local [offset, offset + chunk): the first `real` elements from values, zeros after.
  virtual void writeChunk(size_t offset, size_t chunk, const float* values, size_t real) = 0;
  // The input of param's allgather ([offset, offset + count)): a pointer into the store, or the
  // bytes read into rankBlock (room for count elements), which is then returned.
  virtual const void* gatherInput(size_t param, size_t offset, size_t count, void* rankBlock) = 0;
  // Read-ahead of a later gather's bytes (nvme only; no-ops in memory).
  virtual bool readsAhead() const { return false; }
  virtual bool readPending(size_t /*param*/) const { return false; }
  virtual bool readCompleted(size_t /*param*/) { return false; }
  virtual void readAhead(size_t /*param*/, size_t /*offset*/, size_t /*count*/) {}

  // fp32 values the optimizer may use as its master (in-memory fp32 only), else null.
  virtual float* masterAlias() = 0;
  virtual ModelParamSink sink(bool masterOwned) = 0;
  // The partition's bytes at `place`, plus any staging buffers (host).
  virtual void addMemory(MemoryReport& report, MemPlace place) const = 0;
};

std::unique_ptr<ParamStore> makeParamStore(const ZeroOptions& options, int rank, size_t localSize,
                                           Tracer& tracer);

}  // namespace ds::zero
