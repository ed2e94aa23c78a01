// OpsSlab: one Ops allocation carved into aligned fields (a model's buffer group: residual
// stream, layer internals, head, scratch). Not a pool: layout() reuses the allocation when the
// new fields fit and otherwise frees it and allocates the new total, so it only grows.
// Invariant: field pointers are valid until the next layout(); every field is 256-byte aligned.
#pragma once

#include <string>
#include <vector>

#include "runtime/tensor/ops.h"

namespace ds::runtime {

class OpsSlab {
 public:
  // Fields of the given byte sizes, in order; `what` names the group in an out-of-memory error.
  void layout(Ops& ops, const std::vector<size_t>& bytes, const std::string& what);
  void* field(size_t i) const;
  template <class T>
  T* as(size_t i) const {
    return static_cast<T*>(field(i));
  }
  size_t bytes() const { return buf_.bytes(); }  // allocated (the capacity)
  void release() {
    buf_.reset();
    offsets_.clear();
  }

 private:
  OpsBuffer buf_;
  std::vector<size_t> offsets_;
};

}  // namespace ds::runtime
