// The process-wide count behind KeptScratch (kept_scratch.h).
#include "runtime/tensor/kept_scratch.h"

#include <atomic>

namespace ds::runtime {
namespace {
std::atomic<std::ptrdiff_t> gKeptBytes{0};
}

void detail::addKeptScratch(std::ptrdiff_t bytes) {
  gKeptBytes.fetch_add(bytes, std::memory_order_relaxed);
}

size_t keptScratchBytes() {
  const std::ptrdiff_t now = gKeptBytes.load(std::memory_order_relaxed);
  return now > 0 ? static_cast<size_t>(now) : 0;
}

}  // namespace ds::runtime
