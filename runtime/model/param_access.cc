// ParamAccess (see param_access.h).
#include "runtime/model/param_access.h"

#include "core/error.h"
#include "runtime/tensor/bf16_convert.h"

namespace ds::runtime {

ParamAccess::ParamAccess(const std::vector<zero::ParamInfo>* infos, DType compute, int slots)
    : infos_(infos), compute_(compute), slots_(slots) {}

const float* ParamAccess::value(const zero::ParamTable& p, int i, int slot, int block) {
  const zero::ParamInfo& info = (*infos_)[i];
  if (compute_ == DType::kBF16) {
    if (static_cast<size_t>(i) >= p.value16.size() || p.value16[i] == nullptr) {
      throw InternalError(fmt::format(
          "model: parameter '{}' has no bf16 value (ParamTable.value16) in block {}; bf16 compute "
          "reads value16 between beforeForward/beforeBackward and after*",
          info.name, block));
    }
    std::vector<float>& s = slots_.at(slot);
    if (s.size() < info.numel) s.resize(info.numel);
    bf16ToF32(s.data(), p.value16[i], info.numel);
    return s.data();
  }
  if (static_cast<size_t>(i) >= p.value.size() || p.value[i] == nullptr) {
    throw InternalError(
        fmt::format("model: parameter '{}' has no fp32 value (ParamTable.value) in block {}",
                    info.name, block));
  }
  return p.value[i];
}

float* ParamAccess::grad(const zero::ParamTable& p, int i, int block) const {
  if (static_cast<size_t>(i) >= p.grad.size() || p.grad[i] == nullptr) {
    throw InternalError(
        fmt::format("model: parameter '{}' has no gradient buffer "
                    "(ParamTable.grad) in backward of block {}",
                    (*infos_)[i].name, block));
  }
  return p.grad[i];
}

size_t ParamAccess::scratchBytes() const {
  size_t n = 0;
  for (const auto& s : slots_) n += s.capacity() * sizeof(float);
  return n;
}

}  // namespace ds::runtime
