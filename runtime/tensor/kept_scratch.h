// KeptScratch: a kernel's thread_local scratch buffer that keeps its largest size between calls
// (packing and widening in the bf16 GEMMs, per-thread attention rows), counted process-wide so the
// memory the kernels keep is reported with the model's workspace instead of hiding in the peak
// RSS. At GPT-2 vocabulary the bf16 GEMMs keep a packed copy of the tied embedding (2 bytes x V x
// C, 74 MiB at 124M). Invariant: keptScratchBytes() is the sum of the capacities of every live
// KeptScratch in the process (a thread's are released when it exits).
#pragma once

#include <cstddef>
#include <vector>

namespace ds::runtime {

namespace detail {
void addKeptScratch(std::ptrdiff_t bytes);
}

// Bytes held by every thread's KeptScratch buffers now.
size_t keptScratchBytes();

template <class T>
class KeptScratch {
 public:
  KeptScratch() = default;
  ~KeptScratch() { detail::addKeptScratch(-static_cast<std::ptrdiff_t>(counted_)); }
  KeptScratch(const KeptScratch&) = delete;
  KeptScratch& operator=(const KeptScratch&) = delete;

  // The buffer resized to `count` elements (its capacity never shrinks), now counted.
  std::vector<T>& resized(size_t count) {
    buffer_.resize(count);
    const size_t now = buffer_.capacity() * sizeof(T);
    if (now != counted_) {
      detail::addKeptScratch(static_cast<std::ptrdiff_t>(now) -
                             static_cast<std::ptrdiff_t>(counted_));
      counted_ = now;
    }
    return buffer_;
  }
  // resized(count) unless it already holds that many.
  T* atLeast(size_t count) { return (buffer_.size() < count ? resized(count) : buffer_).data(); }
  T* data() { return buffer_.data(); }
  size_t size() const { return buffer_.size(); }

 private:
  std::vector<T> buffer_;
  size_t counted_ = 0;
};

}  // namespace ds::runtime
