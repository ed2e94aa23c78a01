// GPT-2 forward/backward over Ops (see ops_gpt2.h). The op sequence is Gpt2Model's fp32 path
// call for call, so over CpuOps the gradients are Gpt2Model's bit for bit. Two differences:
// the head is never recomputed (its logits buffer is needed in forward anyway) and the
// cross-entropy backward turns the logits into dlogits in place (forward keeps them and each
// row's log-sum-exp). The MLP's GELU goes through matmulGeluForward / matmulGeluBackward, which
// CudaOps fuses into the products and CpuOps composes from the separate ops (same bits).
#include "runtime/model/ops_gpt2.h"

#include <fmt/format.h>

#include "core/error.h"
#include "runtime/model/batch_check.h"
#include "runtime/model/gpt2_layout.h"

namespace ds::runtime {
namespace {

using namespace gpt2;  // LayerKind

// The head's activation fields (a layer's: gpt2::LayerField).
enum HeadField { fLnf, fLnfMean, fLnfRstd, fLogits, fLosses, fLse, fTokens, fTargets, kHeadFields };
enum ScratchField { sTmp, sDres, sDln, sDqkv, sDatty, sDfch, kScratchFields };

}  // namespace

struct OpsGpt2Model::LayerActs {
  void *ln1, *qkv, *att, *atty, *res2, *ln2, *fch, *fchGelu;
  float *ln1Mean, *ln1Rstd, *ln2Mean, *ln2Rstd;
};
struct OpsGpt2Model::HeadActs {
  void *lnf, *logits;
  float *mean, *rstd, *losses, *lse;
  int32_t *tokens, *targets;
};

OpsGpt2Model::OpsGpt2Model(const ModelConfig& cfg, Ops& ops)
    : cfg_(cfg),
      ops_(ops),
      meta_(cfg),
      dt_(cfg.compute),
      es_(dtypeSize(dt_)),
      V_(cfg.vocabSize),
      Vp_(cfg.paddedVocab > cfg.vocabSize ? cfg.paddedVocab : cfg.vocabSize),
      ckpt_(cfg.activationCheckpointing) {
  if (cfg.compute != DType::kF32 && cfg.compute != DType::kBF16 && cfg.compute != DType::kF16) {
    throw ConfigError(fmt::format("model compute dtype {} not supported; use fp32, bf16 or fp16",
                                  dtypeName(cfg.compute)));
  }
  meta_.dropBackwardParts();  // this backward calls no part hook (gpt2.h)
}

// Gpt2Model's checks and messages; returns the number of targets >= 0.
int OpsGpt2Model::checkBatch(const int32_t* inputs, const int32_t* targets, int B, int T) const {
  return checkGpt2Batch(inputs, targets, B, T, V_, cfg_.seqLen);
}

void OpsGpt2Model::allocate(int B, int T) {
  const size_t BT = static_cast<size_t>(B) * T, C = cfg_.nEmbd, f32 = sizeof(float);
  const size_t act = BT * C * es_, stat = BT * f32;
  const size_t aux = ops_.attentionAuxBytes(B, T, cfg_.nHead);
  const std::vector<size_t> layer = {act, stat, stat, 3 * act, aux,     act,
                                     act, act,  stat, stat,    4 * act, 4 * act};
  std::vector<size_t> layers;
  const int sets = ckpt_ ? 1 : cfg_.nLayer;
  for (int s = 0; s < sets; ++s) layers.insert(layers.end(), layer.begin(), layer.end());
  layers_.layout(ops_, layers, "gpt2 layer activations");
  resid_.layout(ops_, std::vector<size_t>(cfg_.nLayer + 1, act), "gpt2 residual stream");
  head_.layout(ops_,
               {act, stat, stat, BT * size_t(Vp_) * es_, stat, stat, BT * sizeof(int32_t),
                BT * sizeof(int32_t)},
               "gpt2 head activations");
  scratch_.layout(ops_, {act, act, act, 3 * act, act, 4 * act}, "gpt2 workspace");
  B_ = B;
  T_ = T;
}

OpsGpt2Model::LayerActs OpsGpt2Model::layerActs(int l) const {
  const size_t base = static_cast<size_t>(ckpt_ ? 0 : l) * kLayerFields;
  auto v = [&](int f) { return layers_.field(base + f); };
  auto s = [&](int f) { return layers_.as<float>(base + f); };
  return {v(fLn1), v(fQkv),     v(fAtt),     v(fAtty),    v(fRes2),    v(fLn2),
          v(fFch), v(fFchGelu), s(fLn1Mean), s(fLn1Rstd), s(fLn2Mean), s(fLn2Rstd)};
}

OpsGpt2Model::HeadActs OpsGpt2Model::headActs() const {
  return {head_.field(fLnf),          head_.field(fLogits),       head_.as<float>(fLnfMean),
          head_.as<float>(fLnfRstd),  head_.as<float>(fLosses),   head_.as<float>(fLse),
          head_.as<int32_t>(fTokens), head_.as<int32_t>(fTargets)};
}

// ParamAccess's and Gpt2Model's messages for a missing pointer.
const void* OpsGpt2Model::value(const zero::ParamTable& p, int i, int block) const {
  const size_t k = static_cast<size_t>(i);
  if (dt_ != DType::kF32) {
    if (k >= p.value16.size() || p.value16[k] == nullptr) {
      throw InternalError(fmt::format(
          "model: parameter '{}' has no {} value (ParamTable.value16) in block {}; {} compute "
          "reads value16 between beforeForward/beforeBackward and after*",
          params()[k].name, dtypeName(dt_), block, dtypeName(dt_)));
    }
    return p.value16[k];
  }
  if (k >= p.value.size() || p.value[k] == nullptr) {
    throw InternalError(
        fmt::format("model: parameter '{}' has no fp32 value (ParamTable.value) in block {}",
                    params()[k].name, block));
  }
  return p.value[k];
}

float* OpsGpt2Model::grad(const zero::ParamTable& p, int i, int block) const {
  const size_t k = static_cast<size_t>(i);
  if (k >= p.grad.size() || p.grad[k] == nullptr) {
    throw InternalError(
        fmt::format("model: parameter '{}' has no gradient buffer "
                    "(ParamTable.grad) in backward of block {}",
                    params()[k].name, block));
  }
  return p.grad[k];
}

void OpsGpt2Model::zeroAct(void* p, size_t elems) { ops_.zero(p, elems * es_); }

float OpsGpt2Model::forward(const int32_t* inputs, const int32_t* targets, int B, int T,
                            zero::ParamTable& p, zero::BlockHooks& hooks) {
  const int valid = checkBatch(inputs, targets, B, T);
  haveForward_ = false;
  allocate(B, T);
  const size_t BT = static_cast<size_t>(B) * T;
  const HeadActs h = headActs();
  ops_.upload(h.tokens, inputs, BT * sizeof(int32_t));
  ops_.upload(h.targets, targets, BT * sizeof(int32_t));
  valid_ = valid;
  const int L = cfg_.nLayer;

  hooks.beforeForward(0);
  ops_.encoderForward(resid(0), h.tokens, value(p, 0, 0), value(p, 1, 0), B, T, cfg_.nEmbd, dt_);
  hooks.afterForward(0);
  for (int l = 0; l < L; ++l) {
    hooks.beforeForward(l + 1);
    layerForward(l, p, false);
    hooks.afterForward(l + 1);
  }
  hooks.beforeForward(L + 1);
  const double sum = headForward(p);
  hooks.afterForward(L + 1);
  haveForward_ = true;
  return valid_ > 0 ? static_cast<float>(sum / valid_) : 0.0f;
}

// recompute (checkpointing's backward): stop once the internals backward reads are rebuilt.
void OpsGpt2Model::layerForward(int l, const zero::ParamTable& p, bool recompute) {
  const int B = B_, T = T_, C = cfg_.nEmbd, NH = cfg_.nHead, blk = l + 1, BT = B * T;
  const size_t BTC = static_cast<size_t>(BT) * C;
  auto w = [&](int kind) { return value(p, meta_.layerParam(kind, l), blk); };
  const LayerActs a = layerActs(l);
  const void* x = resid(l);
  void* tmp = scratch(sTmp);

  ops_.layernormForward(a.ln1, a.ln1Mean, a.ln1Rstd, x, w(kLn1w), w(kLn1b), BT, C, dt_);
  ops_.matmulForward(a.qkv, a.ln1, w(kQkvw), w(kQkvb), BT, C, 3 * C, dt_);
  ops_.attentionForward(a.atty, a.att, a.qkv, B, T, C, NH, dt_);
  ops_.matmulForward(tmp, a.atty, w(kAttprojw), w(kAttprojb), BT, C, C, dt_);
  ops_.residualLayernormForward(a.res2, a.ln2, a.ln2Mean, a.ln2Rstd, x, tmp, w(kLn2w), w(kLn2b), BT,
                                C, dt_);
  ops_.matmulGeluForward(a.fchGelu, a.fch, a.ln2, w(kFcw), w(kFcb), BT, C, 4 * C, dt_);
  if (recompute) return;
  ops_.matmulForward(tmp, a.fchGelu, w(kFcprojw), w(kFcprojb), BT, 4 * C, C, dt_);
  ops_.residualForward(resid(l + 1), a.res2, tmp, BTC, dt_);
}

double OpsGpt2Model::headForward(const zero::ParamTable& p) {
  const int L = cfg_.nLayer, C = cfg_.nEmbd, BT = B_ * T_, blk = L + 1;
  const int iLnfw = 2 + kLayerKinds * L;
  const HeadActs h = headActs();
  ops_.layernormForward(h.lnf, h.mean, h.rstd, resid(L), value(p, iLnfw, blk),
                        value(p, iLnfw + 1, blk), BT, C, dt_);
  // The head runs over all Vp_ rows of wte (the padding rows are zero, as llm.c keeps them): an
  // aligned width keeps the largest product on cuBLASLt's fast kernels. The softmax covers V_.
  ops_.matmulForward(h.logits, h.lnf, value(p, 0, blk), nullptr, BT, C, Vp_, dt_);
  ops_.crossEntropyForward(h.logits, h.losses, h.lse, h.targets, BT, V_, Vp_, dt_);
  return ops_.sum(h.losses, static_cast<size_t>(BT));
}

void OpsGpt2Model::backward(float lossScale, zero::ParamTable& p, zero::BlockHooks& hooks) {
  if (!haveForward_) throw InternalError("gpt2 backward called without a forward");
  haveForward_ = false;  // the logits become dlogits in place: one backward per forward
  const int L = cfg_.nLayer;
  zeroAct(scratch(sDres), static_cast<size_t>(B_) * T_ * cfg_.nEmbd);
  hooks.beforeBackward(L + 1);
  headBackward(lossScale, p);
  hooks.afterBackward(L + 1);
  for (int l = L - 1; l >= 0; --l) {
    hooks.beforeBackward(l + 1);
    layerBackward(l, p);
    hooks.afterBackward(l + 1);
  }
  hooks.beforeBackward(0);
  ops_.encoderBackward(grad(p, 0, 0), grad(p, 1, 0), scratch(sDres), headActs().tokens, B_, T_,
                       cfg_.nEmbd, dt_);
  hooks.afterBackward(0);
}

void OpsGpt2Model::headBackward(float lossScale, const zero::ParamTable& p) {
  const int L = cfg_.nLayer, C = cfg_.nEmbd, BT = B_ * T_, blk = L + 1;
  const int iLnfw = 2 + kLayerKinds * L, iLnfb = iLnfw + 1;
  const HeadActs h = headActs();
  const float scale = valid_ > 0 ? lossScale / static_cast<float>(valid_) : 0.0f;
  ops_.crossEntropyBackward(h.logits, h.lse, h.targets, BT, V_, Vp_, scale, dt_);
  void* dln = scratch(sDln);
  ops_.matmulBackwardWrite(dln, grad(p, 0, blk), nullptr, h.logits, h.lnf, value(p, 0, blk), BT, C,
                           Vp_, dt_);
  ops_.layernormBackward(scratch(sDres), grad(p, iLnfw, blk), grad(p, iLnfb, blk), dln, resid(L),
                         value(p, iLnfw, blk), h.mean, h.rstd, BT, C, dt_);
}

void OpsGpt2Model::layerBackward(int l, const zero::ParamTable& p) {
  const int B = B_, T = T_, C = cfg_.nEmbd, NH = cfg_.nHead, blk = l + 1, BT = B * T;
  const size_t BTC = static_cast<size_t>(BT) * C;
  if (ckpt_) layerForward(l, p, true);
  const LayerActs a = layerActs(l);
  auto w = [&](int kind) { return value(p, meta_.layerParam(kind, l), blk); };
  auto g = [&](int kind) { return grad(p, meta_.layerParam(kind, l), blk); };
  void *dres = scratch(sDres), *dln = scratch(sDln), *dqkv = scratch(sDqkv);
  void *datty = scratch(sDatty), *dfch = scratch(sDfch);

  // dres holds d(out). out = res2 + fcproj(gelu(fc(ln2(res2)))).
  ops_.matmulGeluBackward(dfch, g(kFcprojw), g(kFcprojb), dres, a.fchGelu, a.fch, w(kFcprojw), BT,
                          4 * C, C, dt_);  // writes dfch
  ops_.matmulBackwardWrite(dln, g(kFcw), g(kFcb), dfch, a.ln2, w(kFcw), BT, C, 4 * C, dt_);
  ops_.layernormBackward(dres, g(kLn2w), g(kLn2b), dln, a.res2, w(kLn2w), a.ln2Mean, a.ln2Rstd, BT,
                         C, dt_);
  // dres holds d(res2). res2 = x + attproj(attention(qkv(ln1(x)))).
  ops_.matmulBackwardWrite(datty, g(kAttprojw), g(kAttprojb), dres, a.atty, w(kAttprojw), BT, C, C,
                           dt_);
  zeroAct(dqkv, 3 * BTC);
  ops_.attentionBackward(dqkv, datty, a.qkv, a.atty, a.att, B, T, C, NH, dt_);
  ops_.matmulBackwardWrite(dln, g(kQkvw), g(kQkvb), dqkv, a.ln1, w(kQkvw), BT, C, 3 * C, dt_);
  ops_.layernormBackward(dres, g(kLn1w), g(kLn1b), dln, resid(l), w(kLn1w), a.ln1Mean, a.ln1Rstd,
                         BT, C, dt_);
  // dres holds d(x), the gradient of the previous block's output.
}

size_t OpsGpt2Model::activationBytes() const {
  return resid_.bytes() + layers_.bytes() + head_.bytes();
}

size_t OpsGpt2Model::workspaceBytes() const { return scratch_.bytes(); }

}  // namespace ds::runtime
