// How a chunk of m elements is split among n reducing ranks: equal slices of a multiple of 16
// elements (64-byte aligned for every dtype up to 4 bytes), the last ones shorter or empty.
// The same on every member. Not a collective.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>

namespace ds::comm::shm_impl {

struct Slice {
  size_t begin = 0;
  size_t count = 0;
};

inline Slice sliceOf(size_t m, int n, int p) {
  size_t per = (m + static_cast<size_t>(n) - 1) / static_cast<size_t>(n);
  per = (per + 15) / 16 * 16;
  size_t begin = std::min(static_cast<size_t>(p) * per, m);
  return {begin, std::min(per, m - begin)};
}

// Chunk `off` of a buffer d (m elements of es bytes), split by sliceOf among n ranks; rank r:
// stageOthersSlices copies every slice but its own into its slot `mine` (at the slice's offset in
// the chunk); gatherOthersSlices copies every other slice p back into d from slotOf(p), where
// its owner left it reduced.
inline void stageOthersSlices(char* mine, const char* d, size_t off, size_t m, size_t es, int n,
                              int r) {
  for (int p = 0; p < n; ++p) {
    const Slice q = sliceOf(m, n, p);
    if (p != r && q.count > 0)
      std::memcpy(mine + q.begin * es, d + (off + q.begin) * es, q.count * es);
  }
}
template <class SlotOf>
void gatherOthersSlices(char* d, size_t off, size_t m, size_t es, int n, int r, SlotOf slotOf) {
  for (int p = 0; p < n; ++p) {
    const Slice q = sliceOf(m, n, p);
    if (p != r && q.count > 0) {
      std::memcpy(d + (off + q.begin) * es, slotOf(p) + q.begin * es, q.count * es);
    }
  }
}

}  // namespace ds::comm::shm_impl
