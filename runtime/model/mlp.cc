// MLP forward/backward (see mlp.h).
#include "runtime/model/mlp.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "runtime/model/batch_check.h"
#include "runtime/model/param_init.h"
#include "runtime/tensor/bf16_convert.h"
#include "runtime/tensor/cross_entropy.h"
#include "runtime/tensor/elementwise.h"
#include "runtime/tensor/matmul.h"

namespace ds::runtime {

MlpModel::MlpModel(const ModelConfig& cfg)
    : sizes_(cfg.sizes),
      bf16_(cfg.compute == DType::kBF16),
      ckpt_(cfg.activationCheckpointing),
      access_(&params_, cfg.compute, 2) {  // slot 0 weight, slot 1 bias
  const int K = numBlocks();
  for (int k = 0; k < K; ++k) {
    zero::ParamInfo w;
    w.name = fmt::format("l{}.w", k);
    w.shape = {sizes_[k + 1], sizes_[k]};
    w.numel = static_cast<size_t>(sizes_[k + 1]) * sizes_[k];
    w.blocks = {k};
    zero::ParamInfo b;
    b.name = fmt::format("l{}.b", k);
    b.shape = {sizes_[k + 1]};
    b.numel = sizes_[k + 1];
    b.blocks = {k};
    b.decay = false;
    params_.push_back(std::move(w));
    params_.push_back(std::move(b));
  }
}

void MlpModel::initParams(float* flat, uint64_t seed) const {
  size_t off = 0;
  for (size_t i = 0; i < params_.size(); ++i) {
    const zero::ParamInfo& info = params_[i];
    if (info.shape.size() == 1) {
      fillConstant(flat + off, info.numel, 0.0f);
    } else {
      // The first layer is an embedding lookup (one-hot input): unit scale, like nn.Embedding.
      // Later layers: LeCun normal, std 1/sqrt(fan_in).
      float stddev = i == 0 ? 1.0f : 1.0f / std::sqrt(static_cast<float>(info.shape[1]));
      fillNormal(flat + off, info.numel, stddev, seed, i);
    }
    off += info.numel;
  }
}

// initParams's choices for one parameter (they must agree bit for bit).
ParamInitRule MlpModel::initRule(size_t param) const {
  const zero::ParamInfo& info = params_.at(param);
  ParamInitRule rule;
  if (info.shape.size() != 1) {
    rule.normal = true;
    rule.stddev = param == 0 ? 1.0f : 1.0f / std::sqrt(static_cast<float>(info.shape[1]));
  }
  return rule;
}

const float* MlpModel::blockInput(int k) {
  in_[k].load(0, x_.data());
  return x_.data();
}

void MlpModel::linear(int k, zero::ParamTable& p, const float* x) {
  const int in = sizes_[k], out = sizes_[k + 1], N = N_;
  const float* w = access_.value(p, 2 * k, 0, k);
  const float* b = access_.value(p, 2 * k + 1, 1, k);  // own slot: w stays valid
  if (k > 0) {
    matmulForward(zw_.data(), x, w, b, N, in, out);
    return;
  }
  // One-hot input: z[n, o] = W[o, token] + b[o].
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    float* z = zw_.data() + static_cast<size_t>(n) * out;
    for (int o = 0; o < out; ++o) z[o] = w[static_cast<size_t>(o) * in + tokens_[n]] + b[o];
  }
}

float MlpModel::forward(const int32_t* inputs, const int32_t* targets, int B, int T,
                        zero::ParamTable& p, zero::BlockHooks& hooks) {
  const int K = numBlocks(), N = B * T;
  checkMlpBatch(inputs, targets, B, T, sizes_[0], sizes_[K]);
  N_ = N;
  tokens_.assign(inputs, inputs + N);
  targets_.assign(targets, targets + N);
  const DType store = bf16_ ? DType::kBF16 : DType::kF32;
  const size_t widest = static_cast<size_t>(*std::max_element(sizes_.begin(), sizes_.end())) * N;
  for (auto* v : {&x_, &zw_, &out_, &dz_, &dout_, &din_}) v->resize(widest);
  in_.resize(K);
  z_.resize(K);
  for (int k = 0; k < K; ++k) {
    if (k > 0) in_[k].layout({static_cast<size_t>(N) * sizes_[k]}, {false}, store);
    if (ckpt_) z_[k].release();
    else z_[k].layout({static_cast<size_t>(N) * sizes_[k + 1]}, {false}, store);
  }
  double sum = 0.0;
  for (int k = 0; k < K; ++k) {
    hooks.beforeForward(k);
    linear(k, p, k > 0 ? blockInput(k) : nullptr);
    const size_t nz = static_cast<size_t>(N) * sizes_[k + 1];
    if (k + 1 < K) {
      if (!ckpt_) z_[k].save(0, zw_.data());
      geluForward(out_.data(), zw_.data(), nz);
      in_[k + 1].save(0, out_.data());
    } else {
      sum = softmaxCrossEntropyForward(zw_.data(), targets_.data(), N, sizes_[K], &valid_);
      if (!ckpt_) z_[k].save(0, zw_.data());
    }
    hooks.afterForward(k);
  }
  haveForward_ = true;
  return valid_ > 0 ? static_cast<float>(sum / valid_) : 0.0f;
}

void MlpModel::backward(float lossScale, zero::ParamTable& p, zero::BlockHooks& hooks) {
  if (!haveForward_) throw InternalError("mlp backward called without a forward");
  const int K = numBlocks(), N = N_;
  for (int k = K - 1; k >= 0; --k) {
    hooks.beforeBackward(k);
    const int in = sizes_[k], out = sizes_[k + 1];
    const size_t nz = static_cast<size_t>(N) * out;
    const float* x = k > 0 ? blockInput(k) : nullptr;
    if (ckpt_) {
      linear(k, p, x);
      if (k + 1 == K) softmaxCrossEntropyForward(zw_.data(), targets_.data(), N, out, nullptr);
      if (bf16_) roundToBf16(zw_.data(), nz);
    } else {
      z_[k].load(0, zw_.data());
    }
    if (k + 1 == K) {
      float scale = valid_ > 0 ? lossScale / static_cast<float>(valid_) : 0.0f;
      softmaxCrossEntropyBackward(dz_.data(), zw_.data(), targets_.data(), N, out, scale);
    } else {
      std::memset(dz_.data(), 0, nz * sizeof(float));
      geluBackward(dz_.data(), zw_.data(), dout_.data(), nz);
    }
    float* gw = access_.grad(p, 2 * k, k);
    float* gb = access_.grad(p, 2 * k + 1, k);
    if (k > 0) {
      const float* w = access_.value(p, 2 * k, 0, k);
      std::memset(din_.data(), 0, static_cast<size_t>(N) * in * sizeof(float));
      matmulBackward(din_.data(), gw, gb, dz_.data(), x, w, N, in, out);
      std::swap(din_, dout_);
    } else {
      // One-hot input: dW[o, token] += dz[n, o]; each thread owns outputs o, rows in order.
#pragma omp parallel for schedule(static)
      for (int o = 0; o < out; ++o) {
        float db = 0.0f;
        for (int n = 0; n < N; ++n) {
          float d = dz_[static_cast<size_t>(n) * out + o];
          gw[static_cast<size_t>(o) * in + tokens_[n]] += d;
          db += d;
        }
        gb[o] += db;
      }
    }
    hooks.afterBackward(k);
  }
}

size_t MlpModel::activationBytes() const {
  size_t n = (tokens_.size() + targets_.size()) * sizeof(int32_t);
  for (const ActSet& a : in_) n += a.bytes();
  for (const ActSet& a : z_) n += a.bytes();
  return n;
}

size_t MlpModel::workspaceBytes() const {
  size_t n = access_.scratchBytes();
  for (const auto* v : {&x_, &zw_, &out_, &dz_, &dout_, &din_}) n += v->size() * sizeof(float);
  return n;
}

double MlpModel::flopsPerToken() const {
  // 6 per weight of the dense layers; the first layer is a gather (2 per output in fwd+bwd).
  double n = 0.0;
  for (size_t k = 1; k + 1 < sizes_.size(); ++k) n += 6.0 * sizes_[k] * sizes_[k + 1];
  return n + 2.0 * sizes_[1];
}

}  // namespace ds::runtime
