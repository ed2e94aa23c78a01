// DeviceMirror: ZeRO on the host, compute on the device. A BlockHooks decorator between a model
// that runs on an Ops device (runtime/model/ops_gpt2) and the host ZeroEngine: before a block
// runs it uploads that block's parameters from the engine's host ParamTable, and after a block's
// backward it streams the block's device gradients back and adds them into the engine's host
// gradients before the engine reduces them. So every ZeRO stage and offload the host engine has
// trains on the GPU unchanged, with the CPU optimizer (ZeRO-Offload's split). Two layouts:
//  - resident (stages 0-2): one device copy of every parameter and gradient, each parameter
//    uploaded once per optimizer step (values change only in step());
//  - windowed (stage 3, ZeRO-Infinity's parameter offload): one slot sized for the largest
//    block's parameters and one for its gradients; each block's parameters are uploaded into the
//    slot as the block starts (forward and backward) and the others have no device copy, so
//    device parameter and gradient bytes are a block's, not the model's.
// Not an owner of the engine; synchronous (no copy overlaps compute yet).
// Invariants: table() holds device pointers only, and in windowed mode only for the block
// between its before* and after* hooks (null otherwise); device gradients are zero when a
// block's backward starts; invalidate() must follow every change of the host parameters.
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
               zero::BlockHooks& inner, std::function<zero::ParamTable&()> hostTable,
               bool windowed = false);

  zero::ParamTable& table() { return table_; }  // device pointers, for the model
  void invalidate() { ++version_; }             // host params changed: upload again

  void beforeForward(int block) override;
  void afterForward(int block) override;
  void beforeBackward(int block) override;
  void afterBackward(int block) override;

  bool windowed() const { return windowed_; }
  size_t valueBytes() const { return values_.bytes(); }  // device parameter bytes held
  size_t gradBytes() const { return grads_.bytes(); }    // device gradient bytes held
  size_t bytesUploaded() const { return uploaded_; }     // since construction (tests, logs)

 private:
  void enter(int block, bool backward);  // upload the block's params (windowed: into the slot)
  void flushGrads(int block);
  void leave(int block);  // windowed: the block's pointers become null again

  Ops& ops_;
  const std::vector<zero::ParamInfo>& params_;
  DType compute_;
  zero::BlockHooks& inner_;
  std::function<zero::ParamTable&()> hostTable_;
  bool windowed_;
  std::vector<std::vector<int>> paramsOfBlock_;  // [block] -> parameter indices
  std::vector<size_t> offset_;  // [param] element offset in the flat buffers (resident)
  OpsBuffer values_, grads_;    // resident: every parameter; windowed: one block's slot
  zero::ParamTable table_;
  std::vector<int64_t> uploadedVersion_;  // [param] version_ of the device copy (-1: none)
  int64_t version_ = 0;
  std::vector<float> staging_;  // host copy of one parameter's device gradient
  size_t uploaded_ = 0;
};

}  // namespace ds::runtime
