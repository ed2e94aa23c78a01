// DeviceMirror (see device_mirror.h): per-block parameter upload and gradient write-back between
// the host ZeroEngine and a device model, resident or windowed.
#include "runtime/engine/device_mirror.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"

namespace ds::runtime {

DeviceMirror::DeviceMirror(Ops& ops, const std::vector<zero::ParamInfo>& params, DType compute,
                           zero::BlockHooks& inner, std::function<zero::ParamTable&()> hostTable,
                           bool windowed)
    : ops_(ops),
      params_(params),
      compute_(compute),
      inner_(inner),
      hostTable_(std::move(hostTable)),
      windowed_(windowed) {
  if (compute_ != DType::kF32 && compute_ != DType::kBF16)
    throw NotSupported(fmt::format("{}: device training computes in fp32 or bf16, not {}",
                                   ops_.name(), dtypeName(compute_)));
  size_t total = 0;
  int blocks = 0;
  offset_.resize(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    offset_[i] = total;
    total += params_[i].numel;
    for (int b : params_[i].blocks) blocks = std::max(blocks, b + 1);
  }
  paramsOfBlock_.resize(size_t(blocks));
  for (size_t i = 0; i < params_.size(); ++i)
    for (int b : params_[i].blocks) paramsOfBlock_[size_t(b)].push_back(int(i));
  size_t slot = total;
  if (windowed_) {
    slot = 0;
    for (const auto& ids : paramsOfBlock_) {
      size_t n = 0;
      for (int i : ids) n += params_[size_t(i)].numel;
      slot = std::max(slot, n);
    }
  }
  values_ = OpsBuffer(ops_, slot * dtypeSize(compute_),
                      windowed_ ? "parameters (one block's slot)" : "parameters (device copy)");
  grads_ = OpsBuffer(ops_, slot * sizeof(float),
                     windowed_ ? "gradients (one block's slot)" : "gradients (device)");
  ops_.zero(grads_.get(), grads_.bytes());
  const size_t n = params_.size();
  table_.value.assign(n, nullptr);
  table_.value16.assign(n, nullptr);
  table_.grad.assign(n, nullptr);
  if (!windowed_) {
    for (size_t i = 0; i < n; ++i) {
      if (compute_ == DType::kBF16) table_.value16[i] = values_.as<const bf16>() + offset_[i];
      else table_.value[i] = values_.as<float>() + offset_[i];
      table_.grad[i] = grads_.as<float>() + offset_[i];
    }
  }
  uploadedVersion_.assign(n, -1);
}

void DeviceMirror::enter(int block, bool backward) {
  if (block < 0 || size_t(block) >= paramsOfBlock_.size()) return;
  zero::ParamTable& host = hostTable_();
  const size_t es = dtypeSize(compute_);
  size_t at = 0;  // windowed: the next free element of the slot
  for (int i : paramsOfBlock_[size_t(block)]) {
    const zero::ParamInfo& info = params_[size_t(i)];
    size_t off = offset_[size_t(i)];
    if (windowed_) {
      off = at;
      at += info.numel;
      if (compute_ == DType::kBF16) table_.value16[size_t(i)] = values_.as<const bf16>() + off;
      else table_.value[size_t(i)] = values_.as<float>() + off;
      table_.grad[size_t(i)] = grads_.as<float>() + off;
      // The slot held another block's gradients: this block starts from zero.
      if (backward) ops_.zero(table_.grad[size_t(i)], info.numel * sizeof(float));
    } else if (uploadedVersion_[size_t(i)] == version_) {
      continue;
    }
    const void* src = compute_ == DType::kBF16
                          ? static_cast<const void*>(host.value16.at(size_t(i)))
                          : static_cast<const void*>(host.value.at(size_t(i)));
    if (src == nullptr)
      throw InternalError(
          fmt::format("device mirror: the engine holds no {} value of '{}' inside block {}",
                      dtypeName(compute_), info.name, block));
    ops_.upload(static_cast<char*>(values_.get()) + off * es, src, info.numel * es);
    uploaded_ += info.numel * es;
    uploadedVersion_[size_t(i)] = version_;
  }
}

void DeviceMirror::flushGrads(int block) {
  if (block < 0 || size_t(block) >= paramsOfBlock_.size()) return;
  zero::ParamTable& host = hostTable_();
  for (int i : paramsOfBlock_[size_t(block)]) {
    const zero::ParamInfo& info = params_[size_t(i)];
    float* dst = host.grad.at(size_t(i));
    if (dst == nullptr)
      throw InternalError(fmt::format(
          "device mirror: the engine holds no gradient of '{}' inside block {}", info.name, block));
    float* dev = table_.grad[size_t(i)];
    staging_.resize(info.numel);
    ops_.download(staging_.data(), dev, info.numel * sizeof(float));
    if (!windowed_) ops_.zero(dev, info.numel * sizeof(float));
    for (size_t k = 0; k < info.numel; ++k) dst[k] += staging_[k];
  }
}

void DeviceMirror::leave(int block) {
  if (!windowed_ || block < 0 || size_t(block) >= paramsOfBlock_.size()) return;
  for (int i : paramsOfBlock_[size_t(block)]) {
    table_.value[size_t(i)] = nullptr;
    table_.value16[size_t(i)] = nullptr;
    table_.grad[size_t(i)] = nullptr;
  }
}

void DeviceMirror::beforeForward(int block) {
  inner_.beforeForward(block);
  enter(block, false);
}

void DeviceMirror::afterForward(int block) {
  leave(block);
  inner_.afterForward(block);
}

void DeviceMirror::beforeBackward(int block) {
  inner_.beforeBackward(block);
  enter(block, true);
}

void DeviceMirror::afterBackward(int block) {
  flushGrads(block);
  leave(block);
  inner_.afterBackward(block);
}

}  // namespace ds::runtime
