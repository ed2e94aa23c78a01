// MlpModel: linear layers with GELU between them and softmax cross-entropy at the end, for small
// tests and the engine's quick plans. Block k = linear layer k. The first layer takes one-hot
// token ids (a row gather of its weight's columns); see ModelConfig for the batch convention.
// Same storage rules as GPT-2: block inputs always held, pre-activations unless checkpointing.
#pragma once

#include <vector>

#include "runtime/model/act_set.h"
#include "runtime/model/model.h"
#include "runtime/model/param_access.h"

namespace ds::runtime {

class MlpModel : public Model {
 public:
  explicit MlpModel(const ModelConfig& cfg);  // cfg already validated by makeModel

  const std::vector<zero::ParamInfo>& params() const override { return params_; }
  int numBlocks() const override { return static_cast<int>(sizes_.size()) - 1; }
  void initParams(float* flat, uint64_t seed) const override;
  ParamInitRule initRule(size_t param) const override;
  float forward(const int32_t* inputs, const int32_t* targets, int B, int T, zero::ParamTable& p,
                zero::BlockHooks& hooks) override;
  void backward(float lossScale, zero::ParamTable& p, zero::BlockHooks& hooks) override;
  size_t activationBytes() const override;
  size_t workspaceBytes() const override;
  double flopsPerToken() const override;

 private:
  // Computes block k's pre-activation into z_ (fp32) from its input (held or gathered).
  void linear(int k, zero::ParamTable& p, const float* x);
  const float* blockInput(int k);

  std::vector<int> sizes_;
  bool bf16_, ckpt_;
  std::vector<zero::ParamInfo> params_;
  ParamAccess access_;
  int N_ = 0, valid_ = 0;
  bool haveForward_ = false;
  std::vector<int32_t> tokens_, targets_;
  std::vector<ActSet> in_;  // [K] block inputs (in_[0] unused: tokens)
  std::vector<ActSet> z_;   // [K] pre-activations (last = probabilities); empty when checkpointing
  std::vector<float> x_, zw_, out_, dz_, dout_, din_;
};

}  // namespace ds::runtime
