// Transient buffer bounds; see transient_bounds.h.
#include "zero/transient_bounds.h"

#include <algorithm>
#include <vector>

#include "zero/param_index.h"

namespace ds::zero {

size_t transientGradBound(const ParamIndex& index, const ParamElems& elems, size_t bucket) {
  std::vector<char> held(index.count(), 0);
  size_t now = 0, peak = 0;
  for (int block = index.numBlocks() - 1; block >= 0; --block) {
    for (size_t param : index.usedBy(block))
      if (!held[param]) {
        held[param] = 1;
        now += elems(param);
      }
    peak = std::max(peak, now);
    for (size_t param : index.completeAfter(block))
      if (held[param]) {
        held[param] = 2;  // released by the next bucket at the latest
        now -= elems(param);
      }
  }
  return peak + bucket;
}

size_t gatherBound(const ParamIndex& index, const ParamElems& elems,
                   const std::function<bool(size_t)>& persistent, size_t prefetchElems) {
  std::vector<size_t> own(size_t(index.numBlocks()), 0);
  for (int block = 0; block < index.numBlocks(); ++block)
    for (size_t param : index.usedBy(block))
      if (!persistent(param)) own[size_t(block)] += elems(param);
  size_t peak = 0;
  for (int block = 0; block < index.numBlocks(); ++block) {
    size_t ahead = 0;
    for (int next : {block - 1, block + 1})
      if (index.validBlock(next)) ahead = std::max(ahead, own[size_t(next)]);
    peak = std::max(peak, own[size_t(block)] + std::min(ahead, prefetchElems));
  }
  return peak;
}

}  // namespace ds::zero
