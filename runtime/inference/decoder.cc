// Decoder (see decoder.h).
#include "runtime/inference/decoder.h"

#include <cmath>
#include <cstddef>
#include <cstring>

#include <fmt/format.h>

#include "core/error.h"
#include "runtime/model/gpt2_layout.h"
#include "runtime/tensor/bf16_convert.h"
#include "runtime/tensor/elementwise.h"
#include "runtime/tensor/gemv.h"
#include "runtime/tensor/layernorm.h"
#include "runtime/tensor/matmul.h"
#include "runtime/tensor/matmul_bf16.h"
#include "runtime/tensor/threads.h"

namespace ds::runtime {
namespace {

using namespace gpt2;  // LayerKind: per-layer parameter kinds in Gpt2Model's (llm.c's) order

size_t sz(int v) { return static_cast<size_t>(v); }

}  // namespace

Decoder::Decoder(const InferenceModel& model, int slots, const DecoderOptions& opts)
    : m_(model),
      opts_(opts),
      cache_(model.config().nLayer, slots, model.config().seqLen, model.config().nEmbd) {}

void Decoder::ensure(int n) {
  const size_t N = sz(n), C = sz(m_.config().nEmbd);
  auto sizeTo = [](std::vector<float>& v, size_t k) {
    if (v.size() < k) v.resize(k);
  };
  sizeTo(x_, N * C);
  sizeTo(ln_, N * C);
  sizeTo(mean_, N);
  sizeTo(rstd_, N);
  sizeTo(qkv_, 3 * N * C);
  sizeTo(atty_, N * C);
  sizeTo(tmp_, N * C);
  sizeTo(res2_, N * C);
  sizeTo(fch_, 4 * N * C);
  sizeTo(fchGelu_, 4 * N * C);
  sizeTo(scores_, N * sz(m_.config().nHead) * sz(m_.config().seqLen));
}

// out[n, cout] = in[n, cin] . W^T + b. A decode step's few rows (DecoderOptions): the
// weight-streaming gemv, which reads W once at memory bandwidth. More rows
// (prefill, big batches): fp32 sgemm; bf16 the native bf16 gemm where the process chose it (as the
// training model does), else the weight widened to fp32 and sgemm.
void Decoder::linear(float* out, const float* in, int kw, int kb, int layer, int n, int cin,
                     int cout) {
  const int iw = m_.layerParam(kw, layer);
  const float* bias = m_.f32(m_.layerParam(kb, layer));
  product(out, in, m_.f32(iw), m_.b16(iw), bias, n, cin, cout);
}

void Decoder::product(float* out, const float* in, const float* w32, const bf16* w16,
                      const float* bias, int n, int cin, int cout) {
  if (m_.dtype() == DType::kF32 && n <= opts_.gemvMaxRows) {
    gemvForward(out, in, w32, bias, n, cin, cout);
  } else if (m_.dtype() == DType::kBF16 && n <= opts_.gemvMaxRowsBf16) {
    gemvForwardBf16(out, in, w16, bias, n, cin, cout);
  } else if (m_.dtype() == DType::kF32) {
    matmulForward(out, in, w32, bias, n, cin, cout);
  } else if (bf16LinearNative()) {
    matmulForwardBf16(out, in, w16, bias, n, cin, cout);
  } else {
    widen_.resize(sz(cin) * sz(cout));
    bf16ToF32(widen_.data(), w16, widen_.size());
    matmulForward(out, in, widen_.data(), bias, n, cin, cout);
  }
}

// atty[i] = softmax(q_i . K[slot_i, 0..pos_i] / sqrt(hs)) . V[slot_i, 0..pos_i], per head.
void Decoder::attention(int layer, const int* slots, const int* pos, int n) {
  const int C = m_.config().nEmbd, NH = m_.config().nHead, hs = C / NH, maxT = cache_.maxT();
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const long work = long(n) * NH * (pos[n - 1] + 1) * hs;
#pragma omp parallel for schedule(static) if (work >= kMinParallelWork)
  for (int ih = 0; ih < n * NH; ++ih) {
    const int i = ih / NH, h = ih % NH, p = pos[i];
    const float* q = qkv_.data() + sz(i) * 3 * sz(C) + sz(h * hs);
    const float* K = cache_.keys(layer, slots[i]) + h * hs;
    const float* V = cache_.values(layer, slots[i]) + h * hs;
    float* s = scores_.data() + sz(ih) * sz(maxT);
    float mx = -INFINITY;
    for (int j = 0; j <= p; ++j) {
      const float* kj = K + sz(j) * sz(C);
      float dot = 0.0f;
      for (int d = 0; d < hs; ++d) dot += q[d] * kj[d];
      s[j] = dot * scale;
      mx = s[j] > mx ? s[j] : mx;
    }
    float sum = 0.0f;
    for (int j = 0; j <= p; ++j) {
      s[j] = std::exp(s[j] - mx);
      sum += s[j];
    }
    const float inv = 1.0f / sum;
    float* y = atty_.data() + sz(i) * sz(C) + sz(h * hs);
    for (int d = 0; d < hs; ++d) y[d] = 0.0f;
    for (int j = 0; j <= p; ++j) {
      const float w = s[j] * inv;
      const float* vj = V + sz(j) * sz(C);
      for (int d = 0; d < hs; ++d) y[d] += w * vj[d];
    }
  }
}

void Decoder::forward(const int* slots, const int32_t* tokens, int n,
                      const std::vector<bool>& logitRows, float* logits) {
  const ModelConfig& cfg = m_.config();
  const int C = cfg.nEmbd, L = cfg.nLayer, V = cfg.vocabSize;
  if (n < 1) return;
  ensure(n);
  pos_.resize(sz(n));
  for (int i = 0; i < n; ++i) {
    const int slot = slots[i];
    if (slot < 0 || slot >= cache_.slots())
      throw InternalError(fmt::format("decoder: slot {} outside [0, {})", slot, cache_.slots()));
    const bool cont = i > 0 && slots[i - 1] == slot;
    pos_[sz(i)] = cont ? pos_[sz(i - 1)] + 1 : cache_.length(slot);
    if (pos_[sz(i)] >= cfg.seqLen)
      throw ConfigError(fmt::format(
          "generate: sequence in slot {} would reach position {}, past the model's context of {} "
          "tokens",
          slot, pos_[sz(i)], cfg.seqLen));
    if (tokens[i] < 0 || tokens[i] >= V)
      throw ConfigError(
          fmt::format("generate: token id {} outside the vocabulary [0, {})", tokens[i], V));
  }
  // Embeddings: wte[token] + wpe[position] (bf16: the wte row widened first).
  const float* wpe = m_.f32(1);
  for (int i = 0; i < n; ++i) {
    float* x = x_.data() + sz(i) * sz(C);
    const float* pe = wpe + sz(pos_[sz(i)]) * sz(C);
    if (m_.dtype() == DType::kF32) {
      const float* te = m_.f32(0) + sz(tokens[i]) * sz(C);
      for (int c = 0; c < C; ++c) x[c] = te[c] + pe[c];
    } else {
      bf16ToF32(x, m_.b16(0) + sz(tokens[i]) * sz(C), sz(C));
      for (int c = 0; c < C; ++c) x[c] = x[c] + pe[c];
    }
  }
  const size_t NC = sz(n) * sz(C);
  for (int l = 0; l < L; ++l) {
    layernormForward(ln_.data(), mean_.data(), rstd_.data(), x_.data(),
                     m_.f32(m_.layerParam(kLn1w, l)), m_.f32(m_.layerParam(kLn1b, l)), n, C);
    linear(qkv_.data(), ln_.data(), kQkvw, kQkvb, l, n, C, 3 * C);
    for (int i = 0; i < n; ++i) {
      const float* row = qkv_.data() + sz(i) * 3 * sz(C);
      const size_t at = sz(pos_[sz(i)]) * sz(C);
      std::memcpy(cache_.keys(l, slots[i]) + at, row + C, sz(C) * sizeof(float));
      std::memcpy(cache_.values(l, slots[i]) + at, row + 2 * C, sz(C) * sizeof(float));
    }
    attention(l, slots, pos_.data(), n);
    linear(tmp_.data(), atty_.data(), kAttprojw, kAttprojb, l, n, C, C);
    residualForward(res2_.data(), x_.data(), tmp_.data(), NC);
    layernormForward(ln_.data(), mean_.data(), rstd_.data(), res2_.data(),
                     m_.f32(m_.layerParam(kLn2w, l)), m_.f32(m_.layerParam(kLn2b, l)), n, C);
    linear(fch_.data(), ln_.data(), kFcw, kFcb, l, n, C, 4 * C);
    geluForward(fchGelu_.data(), fch_.data(), 4 * NC);
    linear(tmp_.data(), fchGelu_.data(), kFcprojw, kFcprojb, l, n, 4 * C, C);
    residualForward(x_.data(), res2_.data(), tmp_.data(), NC);
  }
  for (int i = 0; i < n; ++i) {
    const int slot = slots[i];
    if (pos_[sz(i)] + 1 > cache_.length(slot)) cache_.setLength(slot, pos_[sz(i)] + 1);
  }
  // Final LayerNorm and the tied head, on the rows whose logits were asked for.
  int rows = 0;
  for (int i = 0; i < n; ++i) {
    if (!logitRows.empty() && !logitRows[sz(i)]) continue;
    if (rows != i)
      std::memcpy(x_.data() + sz(rows) * sz(C), x_.data() + sz(i) * sz(C), sz(C) * sizeof(float));
    ++rows;
  }
  if (rows == 0) return;
  const int iLnf = 2 + 12 * L;
  layernormForward(ln_.data(), mean_.data(), rstd_.data(), x_.data(), m_.f32(iLnf),
                   m_.f32(iLnf + 1), rows, C);
  product(logits, ln_.data(), m_.f32(0), m_.b16(0), nullptr, rows, C, V);  // tied: wte once
}

}  // namespace ds::runtime
