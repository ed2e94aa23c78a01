// OpsSlab (see ops_slab.h).
#include "runtime/model/ops_slab.h"

#include "core/error.h"

namespace ds::runtime {
namespace {
constexpr size_t kFieldAlign = 256;  // cuBLASLt and vector loads want aligned rows
}

void OpsSlab::layout(Ops& ops, const std::vector<size_t>& bytes, const std::string& what) {
  offsets_.clear();
  size_t total = 0;
  for (size_t b : bytes) {
    offsets_.push_back(total);
    total += (b + kFieldAlign - 1) / kFieldAlign * kFieldAlign;
  }
  if (total > buf_.bytes()) {
    buf_.reset();  // free first: the old and new groups never coexist
    buf_ = OpsBuffer(ops, total, what);
  }
}

void* OpsSlab::field(size_t i) const {
  if (i >= offsets_.size()) throw InternalError("OpsSlab: field index out of range");
  if (buf_.get() == nullptr) return nullptr;
  return static_cast<char*>(buf_.get()) + offsets_[i];
}

}  // namespace ds::runtime
