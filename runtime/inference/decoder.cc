// Decoder (see decoder.h).
#include "runtime/inference/decoder.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "comm/process_group.h"
#include "core/error.h"
#include "runtime/inference/attention_kernel.h"
#include "runtime/inference/tensor_parallel.h"
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

// bf16 rows up to which gemv runs (GPT-2 124M shapes, one core, a 768 x 200000 bf16 matrix, loaded
// machine: /tmp microbenchmark of gemv.h against matmulForwardBf16, 2026-11-27). Where the process
// runs bf16 linears natively (inputs rounded to bf16) and the CPU has AVX512-BF16, the dot-product
// gemv (gemvForwardBf16Dot) keeps that contract: at 1 row it streamed 10.9 GB/s against AMX's 9.9,
// equal at 2, and AMX won from 4 rows on (3x at 16: its tiles are not bound by FMA ports). Native
// without AVX512-BF16 keeps the gemm; the widen path's gemv (fp32 inputs) reaches 16 rows.
constexpr int kGemvRowsDot = 1;
constexpr int kGemvRowsNativeNoDot = 0;
constexpr int kGemvRowsOther = 16;

}  // namespace

Decoder::Decoder(const InferenceModel& model, int slots, const DecoderOptions& opts)
    : m_(model),
      opts_(opts),
      cache_(model.config().nLayer, slots, model.config().seqLen, model.localEmbd()) {
  if (model.shard().size > 1 &&
      (opts.group == nullptr || opts.group->size() != model.shard().size ||
       opts.group->rank() != model.shard().rank))
    throw InternalError(fmt::format(
        "decoder: the model is tensor-parallel rank {} of {} but the group is {}",
        model.shard().rank, model.shard().size,
        opts.group ? fmt::format("rank {} of {}", opts.group->rank(), opts.group->size())
                   : std::string("missing")));
}

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
// rowParallel: this rank's input columns only; the bias is added once (rank 0) and the partial
// products summed over the tensor-parallel group.
void Decoder::linear(float* out, const float* in, int kw, int kb, int layer, int n, int cin,
                     int cout, bool rowParallel) {
  const int iw = m_.layerParam(kw, layer);
  const float* bias = m_.f32(m_.layerParam(kb, layer));
  if (rowParallel && m_.shard().rank != 0) bias = nullptr;
  product(out, in, m_.f32(iw), m_.b16(iw), bias, n, cin, cout);
  if (rowParallel && m_.shard().size > 1)
    tpAllreduce(opts_.group, out, sz(n) * sz(cout), kw == kAttprojw ? "attproj" : "fcproj");
}

int gemvRowsBf16Auto() {
  if (!bf16LinearNative()) return kGemvRowsOther;
  return gemvBf16DotSupported() ? kGemvRowsDot : kGemvRowsNativeNoDot;
}

void Decoder::product(float* out, const float* in, const float* w32, const bf16* w16,
                      const float* bias, int n, int cin, int cout) {
  const bool isBf16 = m_.dtype() == DType::kBF16;
  if (!isBf16 && n <= opts_.gemvMaxRows) {
    gemvForward(out, in, w32, bias, n, cin, cout);
  } else if (isBf16 &&
             n <= (opts_.gemvMaxRowsBf16 >= 0 ? opts_.gemvMaxRowsBf16 : gemvRowsBf16Auto())) {
    if (bf16LinearNative() && gemvBf16DotSupported())
      gemvForwardBf16Dot(out, in, w16, bias, n, cin, cout);  // inputs rounded, as the native gemm
    else gemvForwardBf16(out, in, w16, bias, n, cin, cout);
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
  // This rank's heads: C is their width (the cache's row), qkv rows hold q, k, v of them.
  const int T = m_.shard().size, NH = m_.config().nHead / T,
            hs = m_.config().nEmbd / m_.config().nHead;
  const int C = NH * hs, maxT = cache_.maxT();
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const AttentionIsa isa = attentionBestIsa(hs);
  const long work = long(n) * NH * (pos[n - 1] + 1) * hs;
  // Round-robin over (row, head): a prefill's later rows see more positions, so contiguous halves
  // would give the second thread most of the work.
#pragma omp parallel for schedule(static, 1) if (work >= kMinParallelWork)
  for (int ih = 0; ih < n * NH; ++ih) {
    const int i = ih / NH, h = ih % NH, p = pos[i];
    AttentionRow row;
    row.q = qkv_.data() + sz(i) * 3 * sz(C) + sz(h * hs);
    row.keys = cache_.keys(layer, slots[i]) + h * hs;
    row.values = cache_.values(layer, slots[i]) + h * hs;
    row.stride = sz(C);
    row.len = p + 1;
    row.hs = hs;
    row.scale = scale;
    cachedAttention(atty_.data() + sz(i) * sz(C) + sz(h * hs), scores_.data() + sz(ih) * sz(maxT),
                    row, isa);
  }
}

void Decoder::forward(const int* slots, const int32_t* tokens, int n,
                      const std::vector<bool>& logitRows, float* logits) {
  const ModelConfig& cfg = m_.config();
  const int C = cfg.nEmbd, L = cfg.nLayer, V = cfg.vocabSize;
  const int Cl = m_.localEmbd(), Vl = m_.localVocab(), T = m_.shard().size;
  const int vocab0 = m_.shard().rank * Vl;  // first wte row this rank holds
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
  // Embeddings: wte[token] + wpe[position] (bf16: the wte row widened first). Tensor-parallel:
  // the rank holding the token's row looks it up, the others give zeros, one allreduce sums.
  const float* wpe = m_.f32(1);
  for (int i = 0; i < n; ++i) {
    float* x = x_.data() + sz(i) * sz(C);
    const int row = tokens[i] - vocab0;
    if (row < 0 || row >= Vl) {
      std::memset(x, 0, sz(C) * sizeof(float));
    } else if (m_.dtype() == DType::kF32) {
      std::memcpy(x, m_.f32(0) + sz(row) * sz(C), sz(C) * sizeof(float));
    } else {
      bf16ToF32(x, m_.b16(0) + sz(row) * sz(C), sz(C));
    }
  }
  if (T > 1) tpAllreduce(opts_.group, x_.data(), sz(n) * sz(C), "the embedding rows");
  for (int i = 0; i < n; ++i) {
    float* x = x_.data() + sz(i) * sz(C);
    const float* pe = wpe + sz(pos_[sz(i)]) * sz(C);
    for (int c = 0; c < C; ++c) x[c] = x[c] + pe[c];
  }
  const size_t NC = sz(n) * sz(C);
  for (int l = 0; l < L; ++l) {
    layernormForward(ln_.data(), mean_.data(), rstd_.data(), x_.data(),
                     m_.f32(m_.layerParam(kLn1w, l)), m_.f32(m_.layerParam(kLn1b, l)), n, C);
    linear(qkv_.data(), ln_.data(), kQkvw, kQkvb, l, n, C, 3 * Cl);
    for (int i = 0; i < n; ++i) {
      const float* row = qkv_.data() + sz(i) * 3 * sz(Cl);
      const size_t at = sz(pos_[sz(i)]) * sz(Cl);
      std::memcpy(cache_.keys(l, slots[i]) + at, row + Cl, sz(Cl) * sizeof(float));
      std::memcpy(cache_.values(l, slots[i]) + at, row + 2 * Cl, sz(Cl) * sizeof(float));
    }
    attention(l, slots, pos_.data(), n);
    linear(tmp_.data(), atty_.data(), kAttprojw, kAttprojb, l, n, Cl, C, true);
    residualForward(res2_.data(), x_.data(), tmp_.data(), NC);
    layernormForward(ln_.data(), mean_.data(), rstd_.data(), res2_.data(),
                     m_.f32(m_.layerParam(kLn2w, l)), m_.f32(m_.layerParam(kLn2b, l)), n, C);
    linear(fch_.data(), ln_.data(), kFcw, kFcb, l, n, C, 4 * Cl);
    geluForward(fchGelu_.data(), fch_.data(), 4 * sz(n) * sz(Cl));
    linear(tmp_.data(), fchGelu_.data(), kFcprojw, kFcprojb, l, n, 4 * Cl, C, true);
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
  if (T == 1) {
    product(logits, ln_.data(), m_.f32(0), m_.b16(0), nullptr, rows, C, V);  // tied: wte once
    return;
  }
  // Vocabulary-parallel head: this rank's Vl logits per row, then all-gathered (the sampler's
  // top-k/top-p/temperature need the whole distribution; V floats a row is small beside the
  // weights read per token) and laid out [rows, V] with rank r's block at columns r*Vl.
  const size_t block = sz(rows) * sz(Vl);
  localLogits_.resize(block);
  gathered_.resize(block * sz(T));
  product(localLogits_.data(), ln_.data(), m_.f32(0), m_.b16(0), nullptr, rows, C, Vl);
  tpAllgather(opts_.group, localLogits_.data(), gathered_.data(), block);
  // The last block may reach wte's padding rows (Vl = V/T rounded up): their logits are dropped.
  for (int r = 0; r < T; ++r) {
    const int width = std::min(Vl, V - r * Vl);
    for (int i = 0; i < rows && width > 0; ++i)
      std::memcpy(logits + sz(i) * sz(V) + sz(r) * sz(Vl),
                  gathered_.data() + sz(r) * block + sz(i) * sz(Vl), sz(width) * sizeof(float));
  }
}

}  // namespace ds::runtime
