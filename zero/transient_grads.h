// TransientGrads: the full-size gradient buffer of each parameter while backward runs (stages 2
// and 3): taken zeroed from a BufferPool when a block using the parameter starts backward,
// published in ParamTable::grad, handed back once copied into a reduce bucket. Not the
// gradient partition the optimizer reads. Invariant: table.grad[p] is non-null exactly while
// p's buffer is held.
#pragma once

#include <cstddef>
#include <vector>

#include "zero/buffer_pool.h"
#include "zero/param_table.h"

namespace ds::zero {

class TransientGrads {
 public:
  TransientGrads(ParamTable& table, BufferPool<float>& pool, size_t numParams);

  bool held(size_t param) const { return !grads_[param].empty(); }
  const float* data(size_t param) const { return grads_[param].data(); }
  // A zeroed buffer of `count` elements for param unless it already holds one.
  void acquire(size_t param, size_t count);
  void release(size_t param);  // no-op when none is held
  size_t peakElems() const { return peakElems_; }

 private:
  ParamTable& table_;
  BufferPool<float>& pool_;
  std::vector<std::vector<float>> grads_;
  size_t elems_ = 0, peakElems_ = 0;
};

}  // namespace ds::zero
