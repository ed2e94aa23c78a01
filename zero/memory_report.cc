// MemoryReport formatting (table and JSON). What is counted lives with the owners: each stage's
// addMemory(), the bucket slots and the optimizer partition (see ZeroEngine::memory()).
#include <fmt/format.h>

#include "zero/zero_engine.h"

namespace ds::zero {
namespace {
const char* kKinds[4] = {"params", "grads", "optimizer_states", "buffers"};
const char* kPlaces[3] = {"device", "host", "nvme"};
std::string mib(size_t size) { return fmt::format("{:.2f} MiB", double(size) / (1 << 20)); }
}  // namespace

size_t MemoryReport::total() const {
  size_t sum = 0;
  for (auto& kind : bytes)
    for (size_t size : kind) sum += size;
  return sum;
}

std::string MemoryReport::toString() const {
  std::string text;
  for (int kind = 0; kind < 4; ++kind)
    text += fmt::format("  {:<17} device {:>12}  host {:>12}  nvme {:>12}\n", kKinds[kind],
                        mib(bytes[kind][0]), mib(bytes[kind][1]), mib(bytes[kind][2]));
  text += fmt::format("  {:<17} {}\n", "total", mib(total()));
  return text;
}

std::string MemoryReport::toJson() const {
  std::string text = "{";
  for (int kind = 0; kind < 4; ++kind) {
    text += fmt::format("{}\"{}\":{{", kind ? "," : "", kKinds[kind]);
    for (int place = 0; place < 3; ++place)
      text += fmt::format("{}\"{}\":{}", place ? "," : "", kPlaces[place], bytes[kind][place]);
    text += "}";
  }
  return text + "}";
}

}  // namespace ds::zero
