// OpsGpt2Model: GPT-2 over the op interface (runtime/tensor/ops.h), the same model as Gpt2Model
// (params, block order, hooks, init, validation errors) with every buffer in the Ops' memory, so
// one code path runs on the CPU (CpuOps) and on a GPU (CudaOps). Not a parameter owner: the
// ParamTable's pointers must be in the Ops' memory (value for fp32 compute, value16 for bf16 and
// fp16 (fp16 bits there); grad always fp32 and ACCUMULATED). Activations live in four Ops
// allocations that only grow.
#pragma once

#include <vector>

#include "runtime/model/gpt2.h"
#include "runtime/model/model.h"
#include "runtime/model/ops_slab.h"
#include "runtime/tensor/ops.h"

namespace ds::runtime {

class OpsGpt2Model final : public Model {
 public:
  // cfg already validated (makeModel(cfg, ops)); ops must outlive the model.
  OpsGpt2Model(const ModelConfig& cfg, Ops& ops);

  const std::vector<zero::ParamInfo>& params() const override { return meta_.params(); }
  int numBlocks() const override { return cfg_.nLayer + 2; }
  void initParams(float* flat, uint64_t seed) const override { meta_.initParams(flat, seed); }
  ParamInitRule initRule(size_t param) const override { return meta_.initRule(param); }
  float forward(const int32_t* inputs, const int32_t* targets, int B, int T, zero::ParamTable& p,
                zero::BlockHooks& hooks) override;
  void backward(float lossScale, zero::ParamTable& p, zero::BlockHooks& hooks) override;
  // Residual stream + layer internals (one layer's with checkpointing) + head, logits, tokens.
  size_t activationBytes() const override;
  // Backward gradient scratch and the forward's projection output.
  size_t workspaceBytes() const override;
  double flopsPerToken() const override { return meta_.flopsPerToken(); }
  // Every Ops allocation the model holds (activations + workspace), for the memory table.
  size_t deviceBytes() const { return activationBytes() + workspaceBytes(); }

 private:
  struct LayerActs;
  struct HeadActs;
  int checkBatch(const int32_t* inputs, const int32_t* targets, int B, int T) const;
  void allocate(int B, int T);
  LayerActs layerActs(int l) const;
  HeadActs headActs() const;
  void* resid(int i) const { return resid_.field(static_cast<size_t>(i)); }
  void* scratch(int i) const { return scratch_.field(static_cast<size_t>(i)); }
  const void* value(const zero::ParamTable& p, int i, int block) const;
  float* grad(const zero::ParamTable& p, int i, int block) const;
  void zeroAct(void* p, size_t elems);
  void layerForward(int l, const zero::ParamTable& p, bool recompute);
  void layerBackward(int l, const zero::ParamTable& p);
  double headForward(const zero::ParamTable& p);
  void headBackward(float lossScale, const zero::ParamTable& p);

  ModelConfig cfg_;
  Ops& ops_;
  Gpt2Model meta_;  // params(), initParams, flopsPerToken and layerParam: one source of truth
  DType dt_;
  size_t es_;  // bytes per activation element
  int V_;
  int Vp_;  // logits row width: the padded vocabulary (wte rows) when set, else V_
  bool ckpt_;
  int B_ = 0, T_ = 0, valid_ = 0;
  bool haveForward_ = false;
  OpsSlab resid_;    // [L+1] block inputs; resid_[0] = embeddings out
  OpsSlab layers_;   // [L] layer internals ([1]: the recompute target with checkpointing)
  OpsSlab head_;     // final LN, logits (dlogits after backward), losses, lse, tokens, targets
  OpsSlab scratch_;  // projection output and backward gradients (one layer's worth)
};

}  // namespace ds::runtime
