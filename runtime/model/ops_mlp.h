// OpsMlpModel: the MLP of mlp.h over the op interface (runtime/tensor/ops.h), with every buffer
// in the Ops' memory. Same params, blocks, init, hooks and errors as MlpModel (it holds one for
// the metadata). Not a gather kernel: the first layer's one-hot input is a real [N, in] one-hot
// matrix fed to matmul (exact in forward; the backward's sums round in gemm order). Buffers
// only grow.
#pragma once

#include <vector>

#include "runtime/model/mlp.h"
#include "runtime/model/model.h"
#include "runtime/model/ops_slab.h"
#include "runtime/tensor/ops.h"

namespace ds::runtime {

class OpsMlpModel final : public Model {
 public:
  // cfg already validated (makeModel(cfg, ops)); ops must outlive the model.
  OpsMlpModel(const ModelConfig& cfg, Ops& ops);

  const std::vector<zero::ParamInfo>& params() const override { return meta_.params(); }
  int numBlocks() const override { return meta_.numBlocks(); }
  void initParams(float* flat, uint64_t seed) const override { meta_.initParams(flat, seed); }
  ParamInitRule initRule(size_t param) const override { return meta_.initRule(param); }
  float forward(const int32_t* inputs, const int32_t* targets, int B, int T, zero::ParamTable& p,
                zero::BlockHooks& hooks) override;
  void backward(float lossScale, zero::ParamTable& p, zero::BlockHooks& hooks) override;
  size_t activationBytes() const override { return acts_.bytes() + z_.bytes(); }
  size_t workspaceBytes() const override { return scratch_.bytes(); }
  double flopsPerToken() const override { return meta_.flopsPerToken(); }
  size_t deviceBytes() const { return activationBytes() + workspaceBytes(); }

 private:
  void check(const int32_t* inputs, const int32_t* targets, int B, int T) const;
  void allocate(int N);
  void uploadBatch(const int32_t* inputs, const int32_t* targets);
  const void* value(const zero::ParamTable& p, int i, int block) const;
  float* grad(const zero::ParamTable& p, int i, int block) const;
  const void* blockInput(int k) const;  // the one-hot matrix for k = 0
  void* preact(int k) const;            // z of block k (the shared one with checkpointing)
  void linear(int k, const zero::ParamTable& p);

  std::vector<int> sizes_;
  Ops& ops_;
  MlpModel meta_;
  DType dt_;
  size_t es_;
  bool ckpt_;
  int N_ = 0, valid_ = 0;
  bool haveForward_ = false;
  OpsSlab acts_;     // one-hot input, targets, losses, block inputs 1..K-1
  OpsSlab z_;        // pre-activations per block (last = logits, dlogits after backward); one with
                     // checkpointing
  OpsSlab scratch_;  // dz, dout, din (widest layer)
};

}  // namespace ds::runtime
