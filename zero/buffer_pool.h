// BufferPool: freed transient buffers (per-parameter gradients, stage-3 gathered parameters)
// kept by size for reuse: fresh pages for every block of every step cost more than the
// collectives (page faults + zeroing). Not an allocator of long-lived buffers; not thread-safe.
// Invariant: pool + live buffers never exceed the peak the engine already reports as buffers.
#pragma once

#include <algorithm>
#include <cstddef>
#include <map>
#include <type_traits>
#include <vector>

#include "zero/bulk_ops.h"

namespace ds::zero {

template <typename T>
class BufferPool {
 public:
  // dst = a buffer of `count` elements from the pool (zeroed when asked) or a fresh zeroed one.
  void take(std::vector<T>& dst, size_t count, bool zeroed) {
    auto found = free_.find(count);
    if (found == free_.end()) {
      dst.assign(count, T(0));
      return;
    }
    dst = std::move(found->second);
    free_.erase(found);
    if (!zeroed) return;
    if constexpr (std::is_same_v<T, float>) bulkZero(dst.data(), dst.size());
    else std::fill(dst.begin(), dst.end(), T(0));
  }
  // Moves buf into the pool (no-op when empty); buf is left empty.
  void give(std::vector<T>& buf) {
    if (buf.empty()) return;
    const size_t count = buf.size();
    free_.emplace(count, std::move(buf));
    buf = std::vector<T>();
  }

 private:
  std::multimap<size_t, std::vector<T>> free_;
};

}  // namespace ds::zero
