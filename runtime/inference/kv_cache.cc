// KvCache (see kv_cache.h).
#include "runtime/inference/kv_cache.h"

namespace ds::runtime {

KvCache::KvCache(int nLayer, int slots, int maxT, int C)
    : slots_(slots),
      maxT_(maxT),
      C_(C),
      k_(static_cast<size_t>(nLayer) * static_cast<size_t>(slots) * static_cast<size_t>(maxT) *
         static_cast<size_t>(C)),
      v_(k_.size()),
      len_(static_cast<size_t>(slots), 0) {}

}  // namespace ds::runtime
