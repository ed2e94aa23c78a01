// How a chunk of m elements is split among n reducing ranks: equal slices of a multiple of 16
// elements (64-byte aligned for every dtype up to 4 bytes), the last ones shorter or empty.
// The same on every member. Not a collective.
#pragma once

#include <algorithm>
#include <cstddef>

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

}  // namespace ds::comm::shm_impl
