// Shared-memory allgather: per chunk, every rank copies piece k of its block into its slot;
// step; every rank copies every other member's piece into its place in the output. One step per
// chunk (a half is refilled two chunks later, after a step all reach only once done with it).
#include <algorithm>
#include <cstring>

#include "comm/shm/shm_collectives.h"

namespace ds::comm::shm_impl {

void allgather(ShmLink& link, const void* input, void* output, const std::vector<size_t>& counts,
               size_t elemSize) {
  size_t total = 0;
  for (size_t c : counts) total += c;
  if (link.cmaFor(total * elemSize)) {
    return allgatherSingleCopy(link, input, output, counts, elemSize);
  }
  auto blockBytes = [&](int p) { return counts[static_cast<size_t>(p)] * elemSize; };
  if (link.mapOnlyFor(total * elemSize) && link.enterMapped(input, blockBytes, "allgather"))
    return allgatherSingleCopy(link, input, output, counts, elemSize, /*entered=*/true);
  const size_t es = elemSize;
  const int n = link.size(), r = link.rank();
  const size_t piece = link.halfBytes() / es;
  std::vector<size_t> offs(counts.size(), 0);
  for (size_t b = 1; b < counts.size(); ++b) offs[b] = offs[b - 1] + counts[b - 1];
  const size_t maxCount = counts.empty() ? 0 : *std::max_element(counts.begin(), counts.end());
  const char* in = static_cast<const char*>(input);
  char* out = static_cast<char*>(output);
  auto len = [&](int b, size_t base) {
    size_t c = counts[static_cast<size_t>(b)];
    return c > base ? std::min(piece, c - base) : size_t{0};
  };
  for (size_t base = 0; base < maxCount; base += piece) {
    const int h = link.nextHalf();
    size_t mine = len(r, base);
    if (mine > 0) std::memcpy(link.slot(r, h), in + base * es, mine * es);
    link.step("allgather");
    for (int p = 0; p < n; ++p) {
      size_t l = len(p, base);
      char* dst = out + (offs[static_cast<size_t>(p)] + base) * es;
      const char* src = p == r ? in + base * es : link.slot(p, h);
      if (l > 0 && dst != src) std::memmove(dst, src, l * es);
    }
  }
}

}  // namespace ds::comm::shm_impl
