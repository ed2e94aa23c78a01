// Shared-memory reduce-scatter: per chunk, every rank copies piece k of each of the others'
// input blocks into its slot (block b at b * P; its own block stays in its input); step; rank p
// reduces piece k of block p over its input and the others' slots (rank order) straight into
// its output (which may be its own input block). One step per chunk: a slot half is refilled two
// chunks later, after a step every member reaches only once done reading it.
#include <algorithm>
#include <cstring>

#include "comm/shm/shm_collectives.h"
#include "core/error.h"

namespace ds::comm::shm_impl {

void reduceScatter(ShmLink& link, const void* input, void* output,
                   const std::vector<size_t>& counts, DType t, ReduceOp op) {
  const size_t es = dtypeSize(t);
  const int n = link.size(), r = link.rank();
  DS_CHECK(counts.size() == static_cast<size_t>(n), "shm reduce_scatter: {} counts for {} ranks",
           counts.size(), n);
  size_t total = 0;
  for (size_t c : counts) total += c;
  if (link.cmaFor(total * es)) return reduceScatterSingleCopy(link, input, output, counts, t, op);
  if (link.mapOnlyFor(total * es)) {
    reserveSingleCopyScratch(link, t);            // nothing to allocate past the entry step
    auto need = [&](int) { return total * es; };  // every member's whole buffer
    if (link.enterMapped(input, need, "reduce_scatter"))
      return reduceScatterSingleCopy(link, input, output, counts, t, op, /*entered=*/true);
  }
  size_t piece = link.halfBytes() / static_cast<size_t>(n) / es;
  if (piece > 16) piece = piece / 16 * 16;
  DS_CHECK(piece > 0, "shm reduce_scatter: slot too small for {} ranks", n);
  std::vector<size_t> offs(counts.size(), 0);
  for (size_t b = 1; b < counts.size(); ++b) offs[b] = offs[b - 1] + counts[b - 1];
  const size_t maxCount = *std::max_element(counts.begin(), counts.end());
  const char* in = static_cast<const char*>(input);
  char* out = static_cast<char*>(output);
  auto len = [&](int b, size_t base) {
    size_t c = counts[static_cast<size_t>(b)];
    return c > base ? std::min(piece, c - base) : size_t{0};
  };
  std::vector<const char*> srcs(static_cast<size_t>(n));
  for (size_t base = 0; base < maxCount; base += piece) {
    const int h = link.nextHalf();
    for (int b = 0; b < n; ++b) {
      size_t l = len(b, base);
      if (b != r && l > 0) {
        std::memcpy(link.slot(r, h) + static_cast<size_t>(b) * piece * es,
                    in + (offs[static_cast<size_t>(b)] + base) * es, l * es);
      }
    }
    link.step("reduce_scatter");
    for (int p = 0; p < n; ++p) {
      srcs[static_cast<size_t>(p)] = p == r ? in + (offs[static_cast<size_t>(r)] + base) * es
                                            : link.slot(p, h) + static_cast<size_t>(r) * piece * es;
    }
    reduceSlice(link, out + base * es, nullptr, srcs, len(r, base), t, op);
  }
}

}  // namespace ds::comm::shm_impl
