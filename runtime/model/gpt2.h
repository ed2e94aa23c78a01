// Gpt2Model: GPT-2 (token + position embeddings, pre-LN blocks with causal self-attention and a
// GELU MLP, final LayerNorm, LM head tied to wte) over the kernels in runtime/tensor. Parameters
// in llm.c's flat order; blocks 0 = embeddings, 1..L = layers, L+1 = final LN + head + loss.
// Activations: the residual stream (every block's input) is always held; a layer's internals are
// held too unless activation checkpointing is on, in which case backward recomputes them.
// Tensor parallelism (gpt2_tensor.h): with a TensorParallel of size T the parameters are this
// rank's shards (local shapes from gpt2TensorShard, same names and order), attention runs on
// nHead/T heads, the MLP on 4*nEmbd/T columns, the head on this rank's vocabulary rows; the
// loss and the residual stream are the same on every tensor rank.
// Data-parallel vocabulary (gpt2_data_vocab.h; ZeRO stage 3, fp32): wte keeps its full shape in
// params() but is rowSharded: ParamTable.value/grad of wte are this rank's rows only, and the
// embedding and head run vocabulary-parallel over the data-parallel group (collective calls).
#pragma once

#include <vector>

#include "runtime/model/act_set.h"
#include "runtime/model/gpt2_data_vocab.h"
#include "runtime/model/gpt2_tensor.h"
#include "runtime/model/model.h"
#include "runtime/model/param_access.h"

namespace ds::runtime {

class Gpt2Model : public Model {
 public:
  explicit Gpt2Model(const ModelConfig& cfg);  // cfg already validated by makeModel
  // This rank's shard of the model split over tp.size tensor ranks (ConfigError naming the
  // parameter and the numbers when a split does not divide: tensor_shard.h).
  Gpt2Model(const ModelConfig& cfg, TensorParallel tp);
  // wte split by vocabulary rows over the data-parallel group dv (fp32 compute, no tensor
  // parallelism: InternalError otherwise).
  Gpt2Model(const ModelConfig& cfg, DataVocab dv);

  const std::vector<zero::ParamInfo>& params() const override { return params_; }
  int numBlocks() const override { return cfg_.nLayer + 2; }
  // Tensor parallel: this rank's shards of the single-rank initialisation (the same values).
  void initParams(float* flat, uint64_t seed) const override;
  ParamInitRule initRule(size_t param) const override;
  float forward(const int32_t* inputs, const int32_t* targets, int B, int T, zero::ParamTable& p,
                zero::BlockHooks& hooks) override;
  void backward(float lossScale, zero::ParamTable& p, zero::BlockHooks& hooks) override;
  size_t activationBytes() const override;
  size_t workspaceBytes() const override;
  double flopsPerToken() const override;

  // The tied wte's gradient may be given by rows (zero::ParamInfo::gradByRows): when the engine
  // installs a GradRowSink for it, the LM head's product d(wte) = dlogits^T lnf waits for the
  // embedding's backward, where each chunk of rows gets the head's product and the embedding's
  // rows (the same sums in the same order as the whole gradient) and goes to the sink. Not with
  // tensor parallelism, the data-parallel vocabulary or bf16 on the native kernels (returns
  // false: the gradient then stays whole).
  bool giveTiedGradByRows();

  // Without activation checkpointing each layer's backward has two parts (zero::ParamInfo::
  // backwardPart: 0 = the MLP half, 1 = the attention half; checkpointing's recompute reads
  // both at once). OpsGpt2Model, whose backward calls no part hook, drops them.
  void dropBackwardParts();

  // Index in params() of per-layer tensor `kind` (0..11, llm.c order ln1w..fcprojb) of layer l.
  int layerParam(int kind, int l) const { return 2 + kind * cfg_.nLayer + l; }
  // fp32 softmax probabilities [B, T, vocab] of the last forward (dsrt generate's tests compare
  // against them); null before a forward, with bf16 activations or activation checkpointing.
  const float* probabilities();

  // Pipeline stage (runtime/engine/pipeline_stage.h): blocks [first, last) only, in the block
  // numbering above. `input` is the fp32 residual stream [B, T, C] entering block `first`
  // (ignored when first == 0). Returns the mean loss when the range ends with the head
  // (last == L+2), else 0. Hooks are called for the range's blocks only.
  float forwardBlocks(int first, int last, const int32_t* inputs, const int32_t* targets, int B,
                      int T, const float* input, zero::ParamTable& p, zero::BlockHooks& hooks);
  // fp32 residual stream leaving the last forwardBlocks range (last <= L+1); valid until the
  // next call on this model.
  const float* blocksOutput();
  // Backward of the last forwardBlocks range. `dOut` is the gradient of blocksOutput() (ignored
  // when the range holds the head); afterwards inputGrad() is the gradient of `input` (when
  // first > 0).
  void backwardBlocks(float lossScale, const float* dOut, zero::ParamTable& p,
                      zero::BlockHooks& hooks);
  const float* inputGrad() const { return dres_.data(); }

 private:
  struct LayerActs;
  struct HeadActs;
  void allocate(int B, int T);
  size_t headRows() const;  // positions the head computes: this rank's, or every rank's (dv_)
  void gatherBatch(size_t positions);  // dv_: the token ids and targets of every rank
  LayerActs layerView(ActSet& s);
  HeadActs headView(ActSet& s);
  const float* residIn(int i);   // fp32 view of block input i (resid_[i])
  float* residOutBuffer(int i);  // where block writes resid_[i] (then commit)
  void commitResid(int i, const float* out);
  void layerForward(int l, zero::ParamTable& p, bool recompute);
  // Calls hooks.beforeBackwardPart(l + 1, 1) between the MLP half and the attention half.
  void layerBackward(int l, zero::ParamTable& p, zero::BlockHooks& hooks);
  double headForward(zero::ParamTable& p, bool recompute);
  double dataVocabHeadForward(const HeadActs& h, const float* wte, bool recompute, bool direct);
  void dataVocabHeadBackward(const HeadActs& h, const float* wte, float* dwte, float lossScale);
  void headBackward(float lossScale, zero::ParamTable& p);
  void embedForward(zero::ParamTable& p);
  void embedBackward(zero::ParamTable& p);
  static zero::GradRowSink* tiedSink(const zero::ParamTable& p);
  void tiedGradByRows(zero::GradRowSink& sink);  // every chunk of wte's rows (giveTiedGradByRows)

  ModelConfig cfg_;
  TensorParallel tp_;
  DataVocab dv_;
  // dv_ only: positions per rank, every rank's tokens and targets (rank order), each rank's
  // count of valid targets, the final LayerNorm output of every position (held for backward) and
  // a [positions, C] scratch (embedding rows, the head's input gradient).
  std::vector<size_t> dvCounts_;
  std::vector<int32_t> tokensAll_, targetsAll_;
  std::vector<int> validAll_;
  std::vector<float> lnfAll_, scratchAll_;
  int V_, Vp_;
  // Per tensor rank (the whole model at size 1): attention width and heads, MLP width, the
  // vocabulary rows [vocabBegin_, vocabBegin_ + wteRows_) of wte and the first vocabCols_ of
  // them that are real tokens (the rest padding: no logits).
  int attC_, heads_, mlpC_, wteRows_, vocabCols_;
  int64_t vocabBegin_ = 0;
  std::vector<zero::ParamInfo> params_;
  ParamAccess access_;
  bool bf16_, ckpt_;
  bool backwardParts_ = false;  // layers declare backward parts (dropBackwardParts)
  int B_ = 0, T_ = 0, valid_ = 0;
  bool haveForward_ = false;
  int rangeFirst_ = 0, rangeLast_ = 0;  // forwardBlocks's range
  std::vector<int32_t> tokens_, targets_;
  // Held for backward.
  std::vector<ActSet> resid_;  // [L+1] block inputs: resid_[0] = embeddings out
  std::vector<ActSet> layer_;  // [L] layer internals (empty sets with checkpointing)
  ActSet head_;                // final LN + probabilities (empty with checkpointing)
  // Transient workspace (one layer's worth, fp32).
  ActSet layerWork_, headWork_;
  std::vector<float> xin_, xout_, tmp_;
  std::vector<float> dres_, dln_, dqkv_, datty_, dfch_, dfchGelu_, dtt_, dlogits_;
  const float* headLnf_ = nullptr;  // the final LayerNorm output headBackward used (by rows)
};

}  // namespace ds::runtime
