// DeviceMirror: ZeRO on the host, compute on the device. A BlockHooks decorator between a model
// that runs on an Ops device (runtime/model/ops_gpt2) and the host ZeroEngine: before a block
// runs it uploads that block's parameters from the engine's host ParamTable into one flat device
// buffer (once per optimizer step: values change only in step()), and after a block's backward
// it streams the block's device gradients back and adds them into the engine's host gradients
// before the engine reduces them. So every ZeRO stage and offload the host engine has trains on
// the GPU unchanged, with the CPU optimizer (ZeRO-Offload's split). Not an owner of the engine.
// Invariants: table() holds device pointers only; device gradients are zero outside a backward
// block; invalidate() must follow every change of the host parameters (step, load).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/dtype.h"
#include "runtime/tensor/ops.h"
#include "zero/param_table.h"

namespace ds::runtime {

class DeviceMirror : public zero::BlockHooks {
 public:
  // hostTable() returns the engine's table, valid inside the engine's hooks of a block.
  DeviceMirror(Ops& ops, const std::vector<zero::ParamInfo>& params, DType compute,
               zero::BlockHooks& inner, std::function<zero::ParamTable&()> hostTable);

  zero::ParamTable& table() { return table_; }  // device pointers, for the model
  void invalidate() { ++version_; }             // host params changed: upload again

  void beforeForward(int block) override;
  void afterForward(int block) override;
  void beforeBackward(int block) override;
  void afterBackward(int block) override;

  size_t valueBytes() const { return values_.bytes(); }
  size_t gradBytes() const { return grads_.bytes(); }
  size_t bytesUploaded() const { return uploaded_; }  // since construction (tests, logs)

 private:
  void upload(int block);
  void flushGrads(int block);

  Ops& ops_;
  const std::vector<zero::ParamInfo>& params_;
  DType compute_;
  zero::BlockHooks& inner_;
  std::function<zero::ParamTable&()> hostTable_;
  std::vector<std::vector<int>> paramsOfBlock_;  // [block] -> parameter indices
  std::vector<size_t> offset_;                   // [param] element offset in the flat buffers
  OpsBuffer values_, grads_;                     // fp32 or bf16 values; fp32 grads
  zero::ParamTable table_;
  std::vector<int64_t> uploadedVersion_;  // [param] version_ of the device copy (-1: none)
  int64_t version_ = 0;
  std::vector<float> staging_;  // host copy of one parameter's device gradient
  size_t uploaded_ = 0;
};

}  // namespace ds::runtime
