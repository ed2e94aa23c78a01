// GPT-2 forward/backward over runtime/tensor kernels (see gpt2.h). The block structure follows
// llm.c's train_gpt2.c; what differs is that parameters come from a ParamTable per block and that
// activations may be bf16-stored or recomputed.
#include "runtime/model/gpt2.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "runtime/model/batch_check.h"
#include "runtime/model/gpt2_layout.h"
#include "runtime/model/param_init.h"
#include "runtime/model/tensor_shard.h"
#include "runtime/tensor/attention.h"
#include "runtime/tensor/bf16_convert.h"
#include "runtime/tensor/cross_entropy.h"
#include "runtime/tensor/elementwise.h"
#include "runtime/tensor/encoder.h"
#include "runtime/tensor/layernorm.h"
#include "runtime/tensor/matmul.h"
#include "runtime/tensor/matmul_bf16.h"
#include "runtime/tensor/sgemm.h"

namespace ds::runtime {
namespace {

using namespace gpt2;  // LayerKind: per-layer tensors in llm.c order
const char* const kLayerNames[kLayerKinds] = {"ln1w",     "ln1b",     "qkvw",    "qkvb",
                                              "attprojw", "attprojb", "ln2w",    "ln2b",
                                              "fcw",      "fcb",      "fcprojw", "fcprojb"};
// Scratch slots for bf16 widening: 0..11 layer kinds, then these.
enum { kSlotWte = kLayerKinds, kSlotWpe, kSlotLnfw, kSlotLnfb, kSlots };

// Fields of the head's activation set (a layer's: gpt2::LayerField).
enum HeadField { fLnf, fLnfMean, fLnfRstd, fProbs, kHeadFields };

void zero(std::vector<float>& v) { std::memset(v.data(), 0, v.size() * sizeof(float)); }

// bf16 value of parameter i for the native bf16 linear layers (no widening); errors as
// ParamAccess::value's.
const bf16* value16(const zero::ParamTable& p, const std::vector<zero::ParamInfo>& infos, int i,
                    int block) {
  if (static_cast<size_t>(i) >= p.value16.size() || p.value16[i] == nullptr) {
    throw InternalError(fmt::format(
        "model: parameter '{}' has no bf16 value (ParamTable.value16) in block {}; bf16 compute "
        "reads value16 between beforeForward/beforeBackward and after*",
        infos[i].name, block));
  }
  return p.value16[i];
}

}  // namespace

struct Gpt2Model::LayerActs {
  float *ln1, *ln1Mean, *ln1Rstd, *qkv, *att, *atty, *res2, *ln2, *ln2Mean, *ln2Rstd, *fch,
      *fchGelu;
};
struct Gpt2Model::HeadActs {
  float *lnf, *mean, *rstd, *probs;
};

Gpt2Model::Gpt2Model(const ModelConfig& cfg) : Gpt2Model(cfg, TensorParallel{}) {}

Gpt2Model::Gpt2Model(const ModelConfig& cfg, DataVocab dv) : Gpt2Model(cfg, TensorParallel{}) {
  if (!dv.enabled()) return;
  if (bf16_ || cfg.compute != DType::kF32)
    throw InternalError("gpt2: the data-parallel vocabulary split needs fp32 compute");
  dv_ = dv;
  const int64_t perRank = dv_.rowsPerRank(Vp_);
  vocabBegin_ = int64_t{dv_.rank} * perRank;
  wteRows_ = static_cast<int>(std::clamp<int64_t>(Vp_ - vocabBegin_, 0, perRank));
  vocabCols_ = static_cast<int>(std::clamp<int64_t>(V_ - vocabBegin_, 0, wteRows_));
  params_[0].rowSharded = true;
}

Gpt2Model::Gpt2Model(const ModelConfig& cfg, TensorParallel tp)
    : cfg_(cfg),
      tp_(tp),
      V_(cfg.vocabSize),
      Vp_(cfg.paddedVocab > 0 ? cfg.paddedVocab : cfg.vocabSize),
      access_(&params_, cfg.compute, kSlots),
      bf16_(cfg.compute == DType::kBF16),
      ckpt_(cfg.activationCheckpointing) {
  const int64_t L = cfg.nLayer, C = cfg.nEmbd;
  const int ranks = std::max(tp_.size, 1);
  if (tp_.rank < 0 || tp_.rank >= ranks)
    throw ConfigError(fmt::format("gpt2: tensor rank {} outside [0, {})", tp_.rank, ranks));
  if (cfg.nHead % ranks != 0)
    throw ConfigError(fmt::format(
        "model.gpt.n_head ({}) does not split over parallel.tensor {}: attention heads are the "
        "unit of the tensor split; pick a tensor size that divides n_head",
        cfg.nHead, ranks));
  heads_ = cfg.nHead / ranks;
  attC_ = cfg.nEmbd / cfg.nHead * heads_;
  mlpC_ = 4 * cfg.nEmbd / ranks;
  wteRows_ = Vp_ / ranks;
  vocabBegin_ = int64_t{tp_.rank} * wteRows_;
  vocabCols_ = static_cast<int>(std::clamp<int64_t>(V_ - vocabBegin_, 0, wteRows_));
  auto add = [&](std::string name, std::vector<int64_t> shape, std::vector<int> blocks) {
    if (ranks > 1) {  // this rank's shard (checks that the split divides, naming the numbers)
      const TensorShard shard = gpt2TensorShard(name, shape, ranks);
      shape = shape.size() == 1 ? std::vector<int64_t>{shard.localRows()}
                                : std::vector<int64_t>{shard.localRows(), shard.localCols()};
    }
    zero::ParamInfo info;
    info.name = std::move(name);
    info.numel = 1;
    for (int64_t d : shape) info.numel *= static_cast<size_t>(d);
    info.decay = shape.size() >= 2;
    info.shape = std::move(shape);
    info.blocks = std::move(blocks);
    params_.push_back(std::move(info));
  };
  add("wte", {Vp_, C}, {0, static_cast<int>(L) + 1});
  add("wpe", {cfg.seqLen, C}, {0});
  const std::vector<int64_t> shapes[kLayerKinds] = {{C}, {C}, {3 * C, C}, {3 * C}, {C, C},     {C},
                                                    {C}, {C}, {4 * C, C}, {4 * C}, {C, 4 * C}, {C}};
  for (int k = 0; k < kLayerKinds; ++k) {
    for (int l = 0; l < L; ++l) {
      add(fmt::format("h.{}.{}", l, kLayerNames[k]), shapes[k], {l + 1});
      if (!ckpt_) params_.back().backwardPart = k < kLn2w ? 1 : 0;  // attention half : MLP half
    }
  }
  backwardParts_ = !ckpt_;
  add("lnfw", {C}, {static_cast<int>(L) + 1});
  add("lnfb", {C}, {static_cast<int>(L) + 1});
}

void Gpt2Model::dropBackwardParts() {
  for (zero::ParamInfo& info : params_) info.backwardPart = 0;
  backwardParts_ = false;
}

void Gpt2Model::initParams(float* flat, uint64_t seed) const {
  if (tp_.enabled()) {  // the single-rank model's values, scattered (holds the whole model once)
    const Gpt2Model whole(cfg_);
    std::vector<float> canonical(whole.numParamsTotal());
    whole.initParams(canonical.data(), seed);
    size_t src = 0, dst = 0;
    for (size_t i = 0; i < params_.size(); ++i) {
      const zero::ParamInfo& info = whole.params()[i];
      gpt2TensorShard(info.name, info.shape, tp_.size)
          .scatter(canonical.data() + src, flat + dst, tp_.rank);
      src += info.numel;
      dst += params_[i].numel;
    }
    return;
  }
  const float residualStd = 0.02f / std::sqrt(2.0f * static_cast<float>(cfg_.nLayer));
  size_t off = 0;
  for (size_t i = 0; i < params_.size(); ++i) {
    const zero::ParamInfo& info = params_[i];
    float* x = flat + off;
    off += info.numel;
    const std::string& n = info.name;
    auto endsWith = [&](const char* s) {
      size_t k = std::strlen(s);
      return n.size() >= k && n.compare(n.size() - k, k, s) == 0;
    };
    if (endsWith("ln1w") || endsWith("ln2w") || n == "lnfw") {
      fillConstant(x, info.numel, 1.0f);
    } else if (info.shape.size() == 1) {
      fillConstant(x, info.numel, 0.0f);  // biases and LayerNorm shifts
    } else if (endsWith("attprojw") || endsWith("fcprojw")) {
      fillNormal(x, info.numel, residualStd, seed, i);
    } else {
      fillNormal(x, info.numel, 0.02f, seed, i);
    }
  }
  // Padded vocabulary rows are never read; keep them zero as llm.c does.
  if (Vp_ > V_) {
    std::memset(flat + static_cast<size_t>(V_) * cfg_.nEmbd, 0,
                static_cast<size_t>(Vp_ - V_) * cfg_.nEmbd * sizeof(float));
  }
}

// initParams's choices for one parameter (kept side by side with it: the two must agree bit for
// bit, tests/runtime/model/param_init_test.cc checks random sub-ranges).
ParamInitRule Gpt2Model::initRule(size_t param) const {
  if (tp_.enabled())
    throw InternalError(
        "gpt2: initRule of a tensor-parallel shard: the rules describe the whole model; "
        "initialise a shard with initParams or scatter the whole model's (tensor_shard.h)");
  const float residualStd = 0.02f / std::sqrt(2.0f * static_cast<float>(cfg_.nLayer));
  const zero::ParamInfo& info = params_.at(param);
  const std::string& n = info.name;
  auto endsWith = [&](const char* s) {
    size_t k = std::strlen(s);
    return n.size() >= k && n.compare(n.size() - k, k, s) == 0;
  };
  ParamInitRule rule;
  if (endsWith("ln1w") || endsWith("ln2w") || n == "lnfw") {
    rule.value = 1.0f;
  } else if (info.shape.size() == 1) {
    rule.value = 0.0f;
  } else {
    rule.normal = true;
    rule.stddev = endsWith("attprojw") || endsWith("fcprojw") ? residualStd : 0.02f;
  }
  if (param == 0 && Vp_ > V_) rule.zeroFrom = static_cast<size_t>(V_) * cfg_.nEmbd;
  return rule;
}

void Gpt2Model::allocate(int B, int T) {
  const size_t BT = static_cast<size_t>(B) * T, C = cfg_.nEmbd;
  const DType store = bf16_ ? DType::kBF16 : DType::kF32;
  const size_t AC = attC_, NHl = heads_, MC = mlpC_;  // this rank's widths (the whole at T 1)
  const std::vector<size_t> lsz = {BT * C, BT,     BT, 3 * BT * AC, B * NHl * T * T, BT * AC,
                                   BT * C, BT * C, BT, BT,          BT * MC,         BT * MC};
  const std::vector<bool> lkeep = {false, true,  true, false, false, false,
                                   false, false, true, true,  false, false};
  const size_t heads = dv_.enabled() ? tokensAll_.size() : BT;  // headRows() before B_, T_
  const std::vector<size_t> hsz = {BT * C, BT, BT, heads * static_cast<size_t>(vocabCols_)};
  const std::vector<bool> hkeep = {false, true, true, false};
  resid_.resize(cfg_.nLayer + 1);
  for (ActSet& r : resid_) r.layout({BT * C}, {false}, store);
  layer_.resize(cfg_.nLayer);
  for (ActSet& a : layer_) {
    if (ckpt_) a.release();
    else a.layout(lsz, lkeep, store);
  }
  if (ckpt_) head_.release();
  else head_.layout(hsz, hkeep, store);
  const bool needWork = ckpt_ || bf16_;
  if (needWork) {
    layerWork_.layout(lsz, lkeep, DType::kF32);
    headWork_.layout(hsz, hkeep, DType::kF32);
  }
  auto sizeTo = [](std::vector<float>& v, size_t n) {
    if (v.size() != n) v.assign(n, 0.0f);
  };
  sizeTo(xin_, bf16_ ? BT * C : 0);
  sizeTo(xout_, BT * C);
  sizeTo(tmp_, BT * C);
  sizeTo(dres_, BT * C);
  sizeTo(dln_, BT * C);
  sizeTo(dqkv_, 3 * BT * AC);
  sizeTo(datty_, BT * AC);
  sizeTo(dfch_, BT * MC);
  sizeTo(dfchGelu_, BT * MC);
  sizeTo(dtt_, static_cast<size_t>(T) * T);
  sizeTo(dlogits_, heads * static_cast<size_t>(vocabCols_));
  sizeTo(lnfAll_, dv_.enabled() ? heads * C : 0);
  sizeTo(scratchAll_, dv_.enabled() ? heads * C : 0);
  B_ = B;
  T_ = T;
}

Gpt2Model::LayerActs Gpt2Model::layerView(ActSet& s) {
  return {s.f32(fLn1),     s.f32(fLn1Mean), s.f32(fLn1Rstd), s.f32(fQkv),
          s.f32(fAtt),     s.f32(fAtty),    s.f32(fRes2),    s.f32(fLn2),
          s.f32(fLn2Mean), s.f32(fLn2Rstd), s.f32(fFch),     s.f32(fFchGelu)};
}

Gpt2Model::HeadActs Gpt2Model::headView(ActSet& s) {
  return {s.f32(fLnf), s.f32(fLnfMean), s.f32(fLnfRstd), s.f32(fProbs)};
}

const float* Gpt2Model::residIn(int i) {
  if (!bf16_) return resid_[i].f32(0);
  resid_[i].load(0, xin_.data());
  return xin_.data();
}

float* Gpt2Model::residOutBuffer(int i) { return bf16_ ? xout_.data() : resid_[i].f32(0); }

void Gpt2Model::commitResid(int i, const float* out) { resid_[i].save(0, out); }

float Gpt2Model::forward(const int32_t* inputs, const int32_t* targets, int B, int T,
                         zero::ParamTable& p, zero::BlockHooks& hooks) {
  checkGpt2Batch(inputs, targets, B, T, V_, cfg_.seqLen);
  const size_t BT = static_cast<size_t>(B) * T;
  tokens_.assign(inputs, inputs + BT);
  targets_.assign(targets, targets + BT);
  if (dv_.enabled()) gatherBatch(BT);
  allocate(B, T);
  const int L = cfg_.nLayer;

  hooks.beforeForward(0);
  embedForward(p);
  hooks.afterForward(0);
  for (int l = 0; l < L; ++l) {
    hooks.beforeForward(l + 1);
    layerForward(l, p, false);
    hooks.afterForward(l + 1);
  }
  hooks.beforeForward(L + 1);
  double sum = headForward(p, false);
  hooks.afterForward(L + 1);
  haveForward_ = true;
  return valid_ > 0 ? static_cast<float>(sum / valid_) : 0.0f;
}

void Gpt2Model::gatherBatch(size_t positions) {
  dvCounts_ = dataVocabCounts(dv_, positions);
  size_t all = 0;
  for (size_t count : dvCounts_) all += count;
  tokensAll_.resize(all);
  targetsAll_.resize(all);
  dataVocabAllgather(dv_, tokens_.data(), tokensAll_.data(), dvCounts_, "the token ids");
  dataVocabAllgather(dv_, targets_.data(), targetsAll_.data(), dvCounts_, "the targets");
  validAll_.assign(dvCounts_.size(), 0);
}

size_t Gpt2Model::headRows() const {
  return dv_.enabled() ? tokensAll_.size() : static_cast<size_t>(B_) * T_;
}

void Gpt2Model::embedForward(zero::ParamTable& p) {
  const float* wte = access_.value(p, 0, kSlotWte, 0);
  const float* wpe = access_.value(p, 1, kSlotWpe, 0);
  float* x0 = residOutBuffer(0);
  if (dv_.enabled()) {
    dataVocabEmbeddingForward(dv_, x0, tokensAll_.data(), dvCounts_, wte, wpe, T_, cfg_.nEmbd,
                              vocabBegin_, wteRows_, scratchAll_.data());
  } else if (tp_.enabled()) {
    tensorEmbeddingForward(tp_, x0, tokens_.data(), wte, wpe, B_, T_, cfg_.nEmbd, vocabBegin_,
                           wteRows_);
  } else {
    encoderForward(x0, tokens_.data(), wte, wpe, B_, T_, cfg_.nEmbd);
  }
  commitResid(0, x0);
}

bool Gpt2Model::giveTiedGradByRows() {
  if (tp_.enabled() || dv_.enabled() || (bf16_ && bf16LinearNative())) return false;
  params_[0].gradByRows = true;
  return true;
}

zero::GradRowSink* Gpt2Model::tiedSink(const zero::ParamTable& p) {
  return p.rowSink.empty() ? nullptr : p.rowSink[0];
}

// Per chunk: the head's product for the chunk's real vocabulary rows (one sgemm over the same K
// as the whole product: each element the same dot product; chunks are whole 16-row blocks, as
// sgemm.h splits rows) onto zeros, then the embedding's rows in (b, t) order, as the whole path
// accumulates them.
void Gpt2Model::tiedGradByRows(zero::GradRowSink& sink) {
  if (!params_[0].gradByRows || headLnf_ == nullptr)
    throw InternalError(
        "gpt2: wte's gradient by rows without giveTiedGradByRows or a head backward");
  const int C = cfg_.nEmbd, BT = B_ * T_;
  const size_t chunk = sink.rowsPerChunk(0), rows = size_t(Vp_), real = size_t(vocabCols_);
  for (size_t first = 0; first < rows; first += chunk) {
    const size_t count = std::min(chunk, rows - first);
    float* g = sink.beginRows(0, first, count);
    const size_t head = first < real ? std::min(count, real - first) : 0;
    if (head > 0)
      sgemm(true, false, static_cast<int>(head), C, BT, 1.0f, dlogits_.data() + first, vocabCols_,
            headLnf_, C, 1.0f, g, C);
    encoderBackwardRows(g, static_cast<int64_t>(first), static_cast<int64_t>(count), dres_.data(),
                        tokens_.data(), B_, T_, C);
    sink.endRows(0, first, count);
  }
}

void Gpt2Model::embedBackward(zero::ParamTable& p) {
  if (zero::GradRowSink* sink = tiedSink(p)) {
    tiedGradByRows(*sink);
    encoderBackwardPositions(access_.grad(p, 1, 0), dres_.data(), B_, T_, cfg_.nEmbd);
  } else if (dv_.enabled()) {
    dataVocabEmbeddingBackward(dv_, access_.grad(p, 0, 0), access_.grad(p, 1, 0), dres_.data(),
                               tokensAll_.data(), dvCounts_, T_, cfg_.nEmbd, vocabBegin_, wteRows_,
                               scratchAll_.data());
  } else if (tp_.enabled()) {
    tensorEmbeddingBackward(access_.grad(p, 0, 0), access_.grad(p, 1, 0), dres_.data(),
                            tokens_.data(), B_, T_, cfg_.nEmbd, vocabBegin_, wteRows_);
  } else {
    encoderBackward(access_.grad(p, 0, 0), access_.grad(p, 1, 0), dres_.data(), tokens_.data(), B_,
                    T_, cfg_.nEmbd);
  }
}

void Gpt2Model::layerForward(int l, zero::ParamTable& p, bool recompute) {
  const int B = B_, T = T_, C = cfg_.nEmbd, blk = l + 1;
  const int BT = B * T;
  const bool direct = !bf16_ && !ckpt_;
  auto w = [&](int kind) { return access_.value(p, layerParam(kind, l), kind, blk); };
  // bf16 mode on AVX512-BF16: linear layers read the bf16 weights directly (matmul_bf16.h).
  const bool native = bf16_ && bf16LinearNative();
  // Row-parallel (attproj, fcproj) under tensor parallelism: the partial products summed over
  // the tensor group, then the (replicated) bias added once.
  // kb < 0: no bias (the caller adds it, as biasGeluForward does for fc).
  auto linear = [&](float* o, const float* in, int kw, int kb, int cin, int cout,
                    bool rowParallel = false) {
    const bool split = rowParallel && tp_.enabled();
    const float* bias = split || kb < 0 ? nullptr : w(kb);
    if (native) {
      matmulForwardBf16(o, in, value16(p, params_, layerParam(kw, l), blk), bias, BT, cin, cout);
    } else {
      matmulForward(o, in, w(kw), bias, BT, cin, cout);
    }
    if (!split) return;
    tensorAllreduce(tp_, o, static_cast<size_t>(BT) * cout, kLayerNames[kw]);
    const float* rowBias = w(kb);
#pragma omp parallel for schedule(static)
    for (long row = 0; row < long(BT); ++row)
      for (int col = 0; col < cout; ++col) o[size_t(row) * cout + col] += rowBias[col];
  };
  const float* x = residIn(l);
  LayerActs a = layerView(direct ? layer_[l] : layerWork_);
  float* out = recompute ? xout_.data() : residOutBuffer(l + 1);

  layernormForward(a.ln1, a.ln1Mean, a.ln1Rstd, x, w(kLn1w), w(kLn1b), BT, C);
  linear(a.qkv, a.ln1, kQkvw, kQkvb, C, 3 * attC_);
  attentionForward(a.atty, a.att, a.qkv, B, T, attC_, heads_);
  linear(tmp_.data(), a.atty, kAttprojw, kAttprojb, attC_, C, true);
  residualForward(a.res2, x, tmp_.data(), static_cast<size_t>(BT) * C);
  layernormForward(a.ln2, a.ln2Mean, a.ln2Rstd, a.res2, w(kLn2w), w(kLn2b), BT, C);
  linear(a.fch, a.ln2, kFcw, -1, C, mlpC_);
  biasGeluForward(a.fchGelu, a.fch, w(kFcb), BT, mlpC_);  // fc's bias, then GELU, one pass
  linear(tmp_.data(), a.fchGelu, kFcprojw, kFcprojb, mlpC_, C, true);
  residualForward(out, a.res2, tmp_.data(), static_cast<size_t>(BT) * C);

  if (recompute) return;  // backward rounds (bf16) and uses layerWork_; resid_ is kept
  if (!direct && !ckpt_) {
    for (int f = 0; f < kLayerFields; ++f) layer_[l].save(f, layerWork_.f32(f));
  }
  commitResid(l + 1, out);
}

// Data-parallel vocabulary (gpt2_data_vocab.h): the logits of every rank's positions over this
// rank's rows, the softmax combined per rank's segment; returns this rank's summed loss.
double Gpt2Model::dataVocabHeadForward(const HeadActs& h, const float* wte, bool recompute,
                                       bool direct) {
  const int C = cfg_.nEmbd;
  const size_t rows = headRows();
  dataVocabAllgather(dv_, h.lnf, lnfAll_.data(), dvCounts_, size_t(C), "the final LayerNorm");
  if (vocabCols_ > 0)
    matmulForward(h.probs, lnfAll_.data(), wte, nullptr, static_cast<int>(rows), C, vocabCols_);
  const TensorParallel group{dv_.group, dv_.rank, dv_.size};
  double mine = 0;
  size_t from = 0;
  for (size_t rank = 0; rank < dvCounts_.size(); ++rank) {
    const size_t count = dvCounts_[rank];
    const double sum = tensorCrossEntropyForward(group, h.probs + from * size_t(vocabCols_),
                                                 targetsAll_.data() + from, static_cast<int>(count),
                                                 vocabCols_, vocabBegin_, &validAll_[rank]);
    if (int(rank) == dv_.rank) mine = sum;
    from += count;
  }
  valid_ = validAll_[size_t(dv_.rank)];
  if (!recompute && !direct && !ckpt_) {
    for (int f = 0; f < kHeadFields; ++f) head_.save(f, headWork_.f32(f));
  }
  return mine;
}

double Gpt2Model::headForward(zero::ParamTable& p, bool recompute) {
  const int L = cfg_.nLayer, C = cfg_.nEmbd, BT = B_ * T_, blk = L + 1;
  const bool direct = !bf16_ && !ckpt_;
  const bool native = bf16_ && bf16LinearNative();
  const float* wte = native ? nullptr : access_.value(p, 0, kSlotWte, blk);
  const float* lnfw = access_.value(p, 2 + kLayerKinds * L, kSlotLnfw, blk);
  const float* lnfb = access_.value(p, 3 + kLayerKinds * L, kSlotLnfb, blk);
  const float* x = residIn(L);
  HeadActs h = headView(direct ? head_ : headWork_);
  layernormForward(h.lnf, h.mean, h.rstd, x, lnfw, lnfb, BT, C);
  if (dv_.enabled()) return dataVocabHeadForward(h, wte, recompute, direct);
  // Tensor parallel: this rank's real vocabulary rows only (vocabCols_ = V_ at T 1).
  if (vocabCols_ > 0 && native) {
    matmulForwardBf16(h.probs, h.lnf, value16(p, params_, 0, blk), nullptr, BT, C, vocabCols_);
  } else if (vocabCols_ > 0) {
    matmulForward(h.probs, h.lnf, wte, nullptr, BT, C, vocabCols_);
  }
  double sum = tp_.enabled()
                   ? tensorCrossEntropyForward(tp_, h.probs, targets_.data(), BT, vocabCols_,
                                               vocabBegin_, &valid_)
                   : softmaxCrossEntropyForward(h.probs, targets_.data(), BT, V_, &valid_);
  if (!recompute && !direct && !ckpt_) {
    for (int f = 0; f < kHeadFields; ++f) head_.save(f, headWork_.f32(f));
  }
  return sum;
}

const float* Gpt2Model::probabilities() {
  if (!haveForward_ || bf16_ || ckpt_ || tp_.enabled() || dv_.enabled()) return nullptr;
  return head_.f32(fProbs);
}

void Gpt2Model::backward(float lossScale, zero::ParamTable& p, zero::BlockHooks& hooks) {
  if (!haveForward_) throw InternalError("gpt2 backward called without a forward");
  const int L = cfg_.nLayer;
  zero(dres_);
  hooks.beforeBackward(L + 1);
  headBackward(lossScale, p);
  hooks.afterBackward(L + 1);
  for (int l = L - 1; l >= 0; --l) {
    hooks.beforeBackward(l + 1);
    layerBackward(l, p, hooks);
    hooks.afterBackward(l + 1);
  }
  hooks.beforeBackward(0);
  embedBackward(p);
  hooks.afterBackward(0);
}

void Gpt2Model::headBackward(float lossScale, zero::ParamTable& p) {
  const int L = cfg_.nLayer, C = cfg_.nEmbd, BT = B_ * T_, blk = L + 1;
  const int iLnfw = 2 + kLayerKinds * L, iLnfb = iLnfw + 1;
  HeadActs h{};
  if (!bf16_ && !ckpt_) {
    h = headView(head_);
  } else {
    if (ckpt_) {
      headForward(p, true);
      if (bf16_) {
        roundToBf16(headWork_.f32(fLnf), headWork_.size(fLnf));
        roundToBf16(headWork_.f32(fProbs), headWork_.size(fProbs));
      }
    } else {
      for (int f = 0; f < kHeadFields; ++f) head_.load(f, headWork_.f32(f));
    }
    h = headView(headWork_);
  }
  const bool native = bf16_ && bf16LinearNative();
  const float* wte = native ? nullptr : access_.value(p, 0, kSlotWte, blk);
  const float* lnfw = access_.value(p, iLnfw, kSlotLnfw, blk);
  const float* x = residIn(L);
  float scale = valid_ > 0 ? lossScale / static_cast<float>(valid_) : 0.0f;
  zero::GradRowSink* rows = tiedSink(p);  // d(wte) by rows: the product waits for embedBackward
  headLnf_ = h.lnf;
  if (dv_.enabled()) {
    dataVocabHeadBackward(h, wte, access_.grad(p, 0, blk), lossScale);
  } else if (tp_.enabled()) {
    tensorCrossEntropyBackward(dlogits_.data(), h.probs, targets_.data(), BT, vocabCols_,
                               vocabBegin_, scale);
  } else {
    softmaxCrossEntropyBackward(dlogits_.data(), h.probs, targets_.data(), BT, V_, scale);
  }
  // dv_: dln_ already holds this rank's positions' input gradient (dataVocabHeadBackward).
  if (!dv_.enabled()) {
    zero(dln_);
    if (vocabCols_ > 0 && native) {
      matmulBackwardBf16(dln_.data(), access_.grad(p, 0, blk), nullptr, dlogits_.data(), h.lnf,
                         value16(p, params_, 0, blk), BT, C, vocabCols_);
    } else if (vocabCols_ > 0) {
      matmulBackward(dln_.data(), rows ? nullptr : access_.grad(p, 0, blk), nullptr,
                     dlogits_.data(), h.lnf, wte, BT, C, vocabCols_);
    }
  }
  tensorAllreduce(tp_, dln_.data(), dln_.size(), "the head's input gradient");
  layernormBackward(dres_.data(), access_.grad(p, iLnfw, blk), access_.grad(p, iLnfb, blk),
                    dln_.data(), x, lnfw, h.mean, h.rstd, BT, C);
}

// Data-parallel vocabulary: dlogits of every position on this rank's rows (each rank's segment
// scaled by its own valid count), d(wte rows) local, the input gradient reduce-scattered to dln_.
void Gpt2Model::dataVocabHeadBackward(const HeadActs& h, const float* wte, float* dwte,
                                      float lossScale) {
  const int C = cfg_.nEmbd;
  size_t from = 0;
  for (size_t rank = 0; rank < dvCounts_.size(); ++rank) {
    const size_t count = dvCounts_[rank];
    const int valid = validAll_[rank];
    const float scale = valid > 0 ? lossScale / static_cast<float>(valid) : 0.0f;
    tensorCrossEntropyBackward(dlogits_.data() + from * size_t(vocabCols_),
                               h.probs + from * size_t(vocabCols_), targetsAll_.data() + from,
                               static_cast<int>(count), vocabCols_, vocabBegin_, scale);
    from += count;
  }
  zero(scratchAll_);
  if (vocabCols_ > 0)
    matmulBackward(scratchAll_.data(), dwte, nullptr, dlogits_.data(), lnfAll_.data(), wte,
                   static_cast<int>(from), C, vocabCols_);
  dataVocabReduceScatter(dv_, scratchAll_.data(), dln_.data(), dvCounts_, size_t(C),
                         "the head's input gradient");
}

void Gpt2Model::layerBackward(int l, zero::ParamTable& p, zero::BlockHooks& hooks) {
  const int B = B_, T = T_, C = cfg_.nEmbd, blk = l + 1, BT = B * T;
  LayerActs a{};
  if (!bf16_ && !ckpt_) {
    a = layerView(layer_[l]);
  } else {
    if (ckpt_) {
      layerForward(l, p, true);
      if (bf16_) {
        for (int f = 0; f < kLayerFields; ++f) {
          if (f == fLn1Mean || f == fLn1Rstd || f == fLn2Mean || f == fLn2Rstd) continue;
          roundToBf16(layerWork_.f32(f), layerWork_.size(f));
        }
      }
    } else {
      for (int f = 0; f < kLayerFields; ++f) layer_[l].load(f, layerWork_.f32(f));
    }
    a = layerView(layerWork_);
  }
  auto w = [&](int kind) { return access_.value(p, layerParam(kind, l), kind, blk); };
  auto g = [&](int kind) { return access_.grad(p, layerParam(kind, l), blk); };
  const bool native = bf16_ && bf16LinearNative();
  auto linearBack = [&](float* din, const float* dout, const float* in, int kw, int kb, int cin,
                        int cout) {
    if (native) {
      matmulBackwardBf16(din, g(kw), g(kb), dout, in, value16(p, params_, layerParam(kw, l), blk),
                         BT, cin, cout);
    } else {
      matmulBackward(din, g(kw), g(kb), dout, in, w(kw), BT, cin, cout);
    }
  };
  const float* x = residIn(l);
  const size_t BTC = static_cast<size_t>(BT) * C;

  // dres_ holds d(out). out = res2 + fcproj(gelu(fc(ln2(res2)))).
  zero(dfchGelu_);
  // Tensor parallel: the row-parallel layers' input gradients are local; the column-parallel
  // layers' (fc, qkv) are partial sums, reduced over the tensor group before the LayerNorm.
  linearBack(dfchGelu_.data(), dres_.data(), a.fchGelu, kFcprojw, kFcprojb, mlpC_, C);
  geluBackwardSet(dfch_.data(), a.fch, dfchGelu_.data(), static_cast<size_t>(BT) * mlpC_);
  zero(dln_);
  linearBack(dln_.data(), dfch_.data(), a.ln2, kFcw, kFcb, C, mlpC_);
  if (!tp_.testSkipFcInputGradAllreduce)
    tensorAllreduce(tp_, dln_.data(), BTC, "fc's input gradient");
  layernormBackward(dres_.data(), g(kLn2w), g(kLn2b), dln_.data(), a.res2, w(kLn2w), a.ln2Mean,
                    a.ln2Rstd, BT, C);
  // The MLP half (backward part 0) is done: stage 3 releases its weights and reduces their
  // gradients before the attention half (part 1) runs.
  if (backwardParts_) hooks.beforeBackwardPart(blk, 1);
  // dres_ now holds d(res2). res2 = x + attproj(attention(qkv(ln1(x)))).
  zero(datty_);
  linearBack(datty_.data(), dres_.data(), a.atty, kAttprojw, kAttprojb, attC_, C);
  zero(dqkv_);
  attentionBackward(dqkv_.data(), dtt_.data(), datty_.data(), a.qkv, a.att, B, T, attC_, heads_);
  zero(dln_);
  linearBack(dln_.data(), dqkv_.data(), a.ln1, kQkvw, kQkvb, C, 3 * attC_);
  tensorAllreduce(tp_, dln_.data(), BTC, "qkv's input gradient");
  layernormBackward(dres_.data(), g(kLn1w), g(kLn1b), dln_.data(), x, w(kLn1w), a.ln1Mean,
                    a.ln1Rstd, BT, C);
  // dres_ now holds d(x), the gradient of the previous block's output.
}

// Pipeline stage ranges: the same block code as forward()/backward(), entered and left through
// the residual stream instead of the tokens and the loss.
float Gpt2Model::forwardBlocks(int first, int last, const int32_t* inputs, const int32_t* targets,
                               int B, int T, const float* input, zero::ParamTable& p,
                               zero::BlockHooks& hooks) {
  const int L = cfg_.nLayer;
  if (first < 0 || last > L + 2 || first >= last)
    throw InternalError(
        fmt::format("gpt2 forwardBlocks: range [{}, {}) outside blocks 0..{}", first, last, L + 1));
  if (dv_.enabled())
    throw InternalError("gpt2 forwardBlocks: a pipeline stage with the data-parallel vocabulary");
  checkGpt2Batch(inputs, targets, B, T, V_, cfg_.seqLen);
  const size_t BT = static_cast<size_t>(B) * T;
  allocate(B, T);
  tokens_.assign(inputs, inputs + BT);
  targets_.assign(targets, targets + BT);
  rangeFirst_ = first;
  rangeLast_ = last;
  if (first == 0) {
    hooks.beforeForward(0);
    embedForward(p);
    hooks.afterForward(0);
  } else {
    commitResid(first - 1, input);
  }
  for (int blk = std::max(first, 1); blk < std::min(last, L + 1); ++blk) {
    hooks.beforeForward(blk);
    layerForward(blk - 1, p, false);
    hooks.afterForward(blk);
  }
  haveForward_ = true;
  if (last < L + 2) return 0.0f;
  hooks.beforeForward(L + 1);
  const double sum = headForward(p, false);
  hooks.afterForward(L + 1);
  return valid_ > 0 ? static_cast<float>(sum / valid_) : 0.0f;
}

const float* Gpt2Model::blocksOutput() { return residIn(rangeLast_ - 1); }

void Gpt2Model::backwardBlocks(float lossScale, const float* dOut, zero::ParamTable& p,
                               zero::BlockHooks& hooks) {
  if (!haveForward_) throw InternalError("gpt2 backwardBlocks called without a forward");
  const int L = cfg_.nLayer;
  if (tiedSink(p) && (rangeFirst_ > 0 || rangeLast_ < L + 2))
    throw InternalError(
        "gpt2 backwardBlocks: wte's gradient by rows needs the head and the "
        "embedding in one range");
  if (rangeLast_ == L + 2) {
    zero(dres_);
    hooks.beforeBackward(L + 1);
    headBackward(lossScale, p);
    hooks.afterBackward(L + 1);
  } else {
    std::memcpy(dres_.data(), dOut, dres_.size() * sizeof(float));
  }
  for (int blk = std::min(rangeLast_, L + 1) - 1; blk >= std::max(rangeFirst_, 1); --blk) {
    hooks.beforeBackward(blk);
    layerBackward(blk - 1, p, hooks);
    hooks.afterBackward(blk);
  }
  if (rangeFirst_ > 0) return;
  hooks.beforeBackward(0);
  embedBackward(p);
  hooks.afterBackward(0);
}

// Includes layerWork_/headWork_: the fp32 block workspace that activation checkpointing (the
// recompute target) and bf16 (the widened copy) keep allocated for the whole step.
size_t Gpt2Model::activationBytes() const {
  size_t n = (tokens_.size() + targets_.size() + tokensAll_.size() + targetsAll_.size()) *
                 sizeof(int32_t) +
             lnfAll_.size() * sizeof(float);
  for (const ActSet& r : resid_) n += r.bytes();
  for (const ActSet& a : layer_) n += a.bytes();
  return n + head_.bytes() + layerWork_.bytes() + headWork_.bytes();
}

size_t Gpt2Model::workspaceBytes() const {
  size_t n = access_.scratchBytes();
  for (const auto* v : {&xin_, &xout_, &tmp_, &dres_, &dln_, &dqkv_, &datty_, &dfch_, &dfchGelu_,
                        &dtt_, &dlogits_, &scratchAll_}) {
    n += v->size() * sizeof(float);
  }
  return n;
}

double Gpt2Model::flopsPerToken() const {
  // Matmul weights (all but wpe, LayerNorm and the padded vocabulary rows) times 6, plus the
  // attention products at T = seqLen counted as llm.c does (6 * L * C * T).
  const double L = cfg_.nLayer, C = cfg_.nEmbd, T = cfg_.seqLen;
  const double n = L * 12.0 * C * C + static_cast<double>(V_) * C;
  return 6.0 * n + 6.0 * L * C * T;
}

}  // namespace ds::runtime
