// TransientGrads: per-parameter gradient buffers during backward.
#include "zero/transient_grads.h"

#include <algorithm>

namespace ds::zero {

TransientGrads::TransientGrads(ParamTable& table, BufferPool<float>& pool, size_t numParams)
    : table_(table), pool_(pool), grads_(numParams) {}

void TransientGrads::acquire(size_t param, size_t count) {
  if (held(param)) return;
  pool_.take(grads_[param], count, true);
  elems_ += count;
  peakElems_ = std::max(peakElems_, elems_);
  table_.grad[param] = grads_[param].data();
}

void TransientGrads::release(size_t param) {
  if (!held(param)) return;
  elems_ -= grads_[param].size();
  pool_.give(grads_[param]);
  table_.grad[param] = nullptr;
}

}  // namespace ds::zero
