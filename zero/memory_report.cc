// Memory accounting: MemoryReport formatting and what one rank's engine holds per kind x place.
// Counted: model params (full flat copy for stages 0-2, partition + persistent copies for 3),
// gradients (full for 0/1, partition for 2/3), optimizer states (master only when it is not the
// model's own fp32 array), buffers (bucket slots, the chunked allgather's staging when
// allgather_bucket_size is smaller than a partition, nvme tiles and the peaks of
// the transient per-parameter gradients and stage-3 gathered params).
#include <fmt/format.h>

#include "zero/zero_engine.h"

namespace ds::zero {
namespace {
const char* kKinds[4] = {"params", "grads", "optimizer_states", "buffers"};
const char* kPlaces[3] = {"device", "host", "nvme"};
std::string mib(size_t b) { return fmt::format("{:.2f} MiB", double(b) / (1 << 20)); }
}  // namespace

size_t MemoryReport::total() const {
  size_t t = 0;
  for (auto& k : bytes)
    for (size_t b : k) t += b;
  return t;
}

std::string MemoryReport::toString() const {
  std::string s;
  for (int k = 0; k < 4; ++k)
    s += fmt::format("  {:<17} device {:>12}  host {:>12}  nvme {:>12}\n", kKinds[k],
                     mib(bytes[k][0]), mib(bytes[k][1]), mib(bytes[k][2]));
  s += fmt::format("  {:<17} {}\n", "total", mib(total()));
  return s;
}

std::string MemoryReport::toJson() const {
  std::string s = "{";
  for (int k = 0; k < 4; ++k) {
    s += fmt::format("{}\"{}\":{{", k ? "," : "", kKinds[k]);
    for (int p = 0; p < 3; ++p)
      s += fmt::format("{}\"{}\":{}", p ? "," : "", kPlaces[p], bytes[k][p]);
    s += "}";
  }
  return s + "}";
}

}  // namespace ds::zero
