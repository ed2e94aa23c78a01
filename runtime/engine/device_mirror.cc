// DeviceMirror (see device_mirror.h): per-block parameter upload and gradient write-back between
// the host ZeroEngine and a device model.
#include "runtime/engine/device_mirror.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"

namespace ds::runtime {

DeviceMirror::DeviceMirror(Ops& ops, const std::vector<zero::ParamInfo>& params, DType compute,
                           zero::BlockHooks& inner, std::function<zero::ParamTable&()> hostTable)
    : ops_(ops),
      params_(params),
      compute_(compute),
      inner_(inner),
      hostTable_(std::move(hostTable)) {
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

  values_ = OpsBuffer(ops_, total * dtypeSize(compute_), "parameters (device copy)");
  grads_ = OpsBuffer(ops_, total * sizeof(float), "gradients (device)");
  ops_.zero(grads_.get(), grads_.bytes());
  const size_t n = params_.size();
  table_.value.assign(n, nullptr);
  table_.value16.assign(n, nullptr);
  table_.grad.assign(n, nullptr);
  for (size_t i = 0; i < n; ++i) {
    if (compute_ == DType::kBF16) table_.value16[i] = values_.as<const bf16>() + offset_[i];
    else table_.value[i] = values_.as<float>() + offset_[i];
    table_.grad[i] = grads_.as<float>() + offset_[i];
  }
  uploadedVersion_.assign(n, -1);
}

void DeviceMirror::upload(int block) {
  if (block < 0 || size_t(block) >= paramsOfBlock_.size()) return;
  zero::ParamTable& host = hostTable_();
  for (int i : paramsOfBlock_[size_t(block)]) {
    if (uploadedVersion_[size_t(i)] == version_) continue;
    const zero::ParamInfo& info = params_[size_t(i)];
    const void* src = compute_ == DType::kBF16
                          ? static_cast<const void*>(host.value16.at(size_t(i)))
                          : static_cast<const void*>(host.value.at(size_t(i)));
    if (src == nullptr)
      throw InternalError(
          fmt::format("device mirror: the engine holds no {} value of '{}' inside block {}",
                      dtypeName(compute_), info.name, block));
    const size_t bytes = info.numel * dtypeSize(compute_);
    ops_.upload(static_cast<char*>(values_.get()) + offset_[size_t(i)] * dtypeSize(compute_), src,
                bytes);
    uploaded_ += bytes;
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
    ops_.zero(dev, info.numel * sizeof(float));
    for (size_t k = 0; k < info.numel; ++k) dst[k] += staging_[k];
  }
}

void DeviceMirror::beforeForward(int block) {
  inner_.beforeForward(block);
  upload(block);
}

void DeviceMirror::afterForward(int block) { inner_.afterForward(block); }

void DeviceMirror::beforeBackward(int block) {
  inner_.beforeBackward(block);
  upload(block);
}

void DeviceMirror::afterBackward(int block) {
  flushGrads(block);
  inner_.afterBackward(block);
}

}  // namespace ds::runtime
