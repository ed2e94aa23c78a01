// BoundAllreduceCache: libgloo's AllreduceRingChunked kept per shape and re-pointed per call. The
// ring reads its input through two bound send buffers and reduces into ptrs_[0]; both are plain
// pointers between runs (a run ends with a notification exchange, after which no send of it is
// pending), so re-pointing is local. A new instance registers its receive buffers, then a 1-byte
// exchange tells each rank that the peer's are registered before any data is sent to them.
#include "comm/gloo/allreduce_bound.h"

#include <gloo/allreduce_ring_chunked.h>

#include <algorithm>
#include <cstdint>

#include "comm/gloo/reduce_kernels.h"
#include "core/env.h"
#include "core/error.h"

namespace ds::comm::gloo_impl {

// The protected pointer of a gloo transport buffer, reached through a member pointer formed in a
// derived class (never instantiated).
struct BufferPtrAccess : ::gloo::transport::Buffer {
  static void* ::gloo::transport::Buffer::*member() { return &BufferPtrAccess::ptr_; }
};

struct BoundAllreduceCache::Instance {
  virtual ~Instance() = default;
  virtual void rebind(void* data) = 0;
  virtual void exec() = 0;
};

namespace {

template <typename T>
class BoundRing final : public ::gloo::AllreduceRingChunked<T> {
 public:
  BoundRing(const std::shared_ptr<::gloo::Context>& ctx, T* data, size_t count,
            const ::gloo::ReductionFunction<T>* fn)
      : ::gloo::AllreduceRingChunked<T>(ctx, std::vector<T*>{data}, static_cast<int>(count),
                                        fn) {}
  void rebind(T* data) {
    if (this->ptrs_[0] == data) return;
    this->ptrs_[0] = data;
    for (auto& b : this->sendDataBuf_) {
      if (b) b.get()->*BufferPtrAccess::member() = data;
    }
  }
};

template <typename T>
struct Holder final : BoundAllreduceCache::Instance {
  std::unique_ptr<BoundRing<T>> ring;
  void rebind(void* data) override { ring->rebind(static_cast<T*>(data)); }
  void exec() override { ring->run(); }
};

template <typename T>
std::unique_ptr<BoundAllreduceCache::Instance> make(const std::shared_ptr<::gloo::Context>& ctx,
                                                    void* data, size_t count, ReduceOp op) {
  const ::gloo::ReductionFunction<T>* fn = ::gloo::ReductionFunction<T>::sum;
  if (op == ReduceOp::kMax) fn = ::gloo::ReductionFunction<T>::max;
  if (op == ReduceOp::kMin) fn = ::gloo::ReductionFunction<T>::min;
  auto h = std::make_unique<Holder<T>>();
  h->ring = std::make_unique<BoundRing<T>>(ctx, static_cast<T*>(data), count, fn);
  return h;
}

}  // namespace

size_t boundAllreduceBytes() {
  static const size_t v = static_cast<size_t>(
      getEnvInt("DS_GLOO_BOUND_ALLREDUCE_BYTES", 4 << 20, 0, 1 << 30));
  return v;
}

BoundAllreduceCache::BoundAllreduceCache(GlooLink& link) : link_(link) {}
BoundAllreduceCache::~BoundAllreduceCache() = default;

bool BoundAllreduceCache::eligible(int worldSize, size_t count, DType t, ReduceOp op) {
  if (worldSize != 2 || count == 0) return false;
  if (count * dtypeSize(t) > boundAllreduceBytes()) return false;
  // fp32 max/min stay on our kernels: op(rank 0's, rank 1's) fixes which NaN / signed zero wins,
  // and here the operand order would depend on which rank reduces the chunk.
  switch (t) {
    case DType::kF32:
      return op == ReduceOp::kSum || op == ReduceOp::kAvg;
    case DType::kI32:
    case DType::kI64:
      return true;
    default:
      return false;
  }
}

BoundAllreduceCache::Entry& BoundAllreduceCache::lookup(size_t count, DType t, ReduceOp op,
                                                        void* data) {
  // kAvg runs as a sum: one instance serves both.
  ReduceOp keyOp = op == ReduceOp::kAvg ? ReduceOp::kSum : op;
  auto it = std::find_if(lru_.begin(), lru_.end(), [&](const Entry& e) {
    return e.count == count && e.dtype == t && e.op == keyOp;
  });
  if (it != lru_.end()) {
    lru_.splice(lru_.begin(), lru_, it);
    return lru_.front();
  }
  const size_t bytes = count * dtypeSize(t);
  while (!lru_.empty() && (lru_.size() >= kMaxEntries || bytes_ + bytes > kMaxBytes)) {
    bytes_ -= lru_.back().bytes;
    lru_.pop_back();
  }
  const int peer = 1 - link_.rank();
  std::unique_ptr<Instance> inst;
  try {
    std::shared_ptr<::gloo::Context> ctx = link_.context();
    switch (t) {
      case DType::kF32: inst = make<float>(ctx, data, count, keyOp); break;
      case DType::kI32: inst = make<int32_t>(ctx, data, count, keyOp); break;
      default: inst = make<int64_t>(ctx, data, count, keyOp); break;
    }
  } catch (const ds::Error&) {
    throw;
  } catch (const std::exception& e) {
    link_.fail(peer, "allreduce",
               fmt::format("setting up the 2-rank ring with {}: {}", peer, e.what()));
  }
  // Both ranks' receive buffers exist before either sends them data.
  char mine = 1, theirs = 0;
  uint64_t slot = link_.collectiveSlots();
  UBuf out = link_.buffer(&mine, 1), in = link_.buffer(&theirs, 1);
  link_.recv(in, peer, slot, 0, 1, "allreduce");
  link_.send(out, peer, slot, 0, 1, "allreduce");
  link_.waitRecv(in, peer, "allreduce");
  link_.waitSend(out, peer, "allreduce");
  lru_.push_front(Entry{count, t, keyOp, bytes, std::move(inst)});
  bytes_ += bytes;
  ++builds_;
  return lru_.front();
}

bool BoundAllreduceCache::run(void* data, size_t count, DType t, ReduceOp op) {
  if (!eligible(link_.size(), count, t, op)) return false;
  Entry& e = lookup(count, t, op, data);
  const int peer = 1 - link_.rank();
  try {
    e.inst->rebind(data);
    e.inst->exec();
  } catch (const ds::Error&) {
    throw;
  } catch (const std::exception& ex) {
    link_.fail(peer, "allreduce",
               fmt::format("2-rank ring (libgloo AllreduceRingChunked, timeout {} ms): {}",
                           link_.timeout().count(), ex.what()));
  }
  finishAvg(data, count, t, op, 2);
  return true;
}

}  // namespace ds::comm::gloo_impl
