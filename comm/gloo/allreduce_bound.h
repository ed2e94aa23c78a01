// Two-rank allreduce on libgloo's own AllreduceRingChunked (bound buffers: a peer's data is
// written the moment it is sent, no ready-to-receive round trip), one cached instance per shape
// (count, dtype, op), re-pointed at the caller's buffer on every call (no copy). Every member keys,
// builds and evicts alike (the shape and the call order are the same on every rank; pointers are
// not, and never enter a decision), so the instances' slots match without extra agreement.
#pragma once

#include <cstddef>
#include <list>
#include <memory>

#include "comm/gloo/gloo_link.h"
#include "comm/types.h"
#include "core/dtype.h"

namespace ds::comm::gloo_impl {

class BoundAllreduceCache {
 public:
  explicit BoundAllreduceCache(GlooLink& link);
  ~BoundAllreduceCache();
  BoundAllreduceCache(const BoundAllreduceCache&) = delete;
  BoundAllreduceCache& operator=(const BoundAllreduceCache&) = delete;

  // Allreduces `data` in place when eligible: 2 ranks, 0 < bytes <= boundAllreduceBytes(), dtype
  // fp32 (sum, avg) or int32/int64 (sum, avg, max, min). Each element is reduced once, by one rank,
  // and sent to the other, so both hold the same bits. false (nothing done) when not eligible; a
  // failure throws CommError naming the peer (GlooLink::fail) and breaks the group.
  bool run(void* data, size_t count, DType t, ReduceOp op);

  static bool eligible(int worldSize, size_t count, DType t, ReduceOp op);
  size_t entries() const { return lru_.size(); }
  uint64_t builds() const { return builds_; }  // instances constructed so far (tests)
  static constexpr size_t kMaxEntries = 16;
  static constexpr size_t kMaxBytes = size_t{64} << 20;  // sum of cached shapes' buffer bytes

  struct Instance;  // allreduce_bound.cc

 private:
  struct Entry {
    size_t count;
    DType dtype;
    ReduceOp op;
    size_t bytes;
    std::unique_ptr<Instance> inst;
  };
  Entry& lookup(size_t count, DType t, ReduceOp op, void* data);
  GlooLink& link_;
  std::list<Entry> lru_;  // most recently used first
  size_t bytes_ = 0;
  uint64_t builds_ = 0;
};

// DS_GLOO_BOUND_ALLREDUCE_BYTES, default 4 MiB, 0 disables (documented in docs/comm.md).
size_t boundAllreduceBytes();

}  // namespace ds::comm::gloo_impl
