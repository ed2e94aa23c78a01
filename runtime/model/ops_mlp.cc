// MLP forward/backward over Ops (see ops_mlp.h): MlpModel's op sequence, with the one-hot gather
// as a matmul and the cross-entropy backward in place.
#include "runtime/model/ops_mlp.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "runtime/model/batch_check.h"

namespace ds::runtime {
namespace {
enum ActField { aOneHot, aTargets, aLosses, aLse, kActFixed };  // then block inputs 1..K-1
enum ScratchField { sDz, sDout, sDin };
constexpr uint16_t kBf16One = 0x3f80, kFp16One = 0x3c00;
}  // namespace

OpsMlpModel::OpsMlpModel(const ModelConfig& cfg, Ops& ops)
    : sizes_(cfg.sizes),
      ops_(ops),
      meta_(cfg),
      dt_(cfg.compute),
      es_(dtypeSize(dt_)),
      ckpt_(cfg.activationCheckpointing) {}

void OpsMlpModel::check(const int32_t* inputs, const int32_t* targets, int B, int T) const {
  checkMlpBatch(inputs, targets, B, T, sizes_[0], sizes_[numBlocks()]);
}

void OpsMlpModel::allocate(int N) {
  const int K = numBlocks();
  const size_t n = static_cast<size_t>(N), stat = n * sizeof(int32_t);
  std::vector<size_t> acts = {n * sizes_[0] * es_, stat, stat, stat};
  for (int k = 1; k < K; ++k) acts.push_back(n * sizes_[k] * es_);
  acts_.layout(ops_, acts, "mlp activations");
  std::vector<size_t> z;
  if (ckpt_) {
    z.push_back(n * *std::max_element(sizes_.begin() + 1, sizes_.end()) * es_);
  } else {
    for (int k = 0; k < K; ++k) z.push_back(n * sizes_[k + 1] * es_);
  }
  z_.layout(ops_, z, "mlp pre-activations");
  const size_t widest = n * *std::max_element(sizes_.begin(), sizes_.end()) * es_;
  scratch_.layout(ops_, {widest, widest, widest}, "mlp workspace");
  N_ = N;
}

// Targets as they are; inputs as one-hot rows in the activation dtype (exact in bf16 and fp16).
void OpsMlpModel::uploadBatch(const int32_t* inputs, const int32_t* targets) {
  const size_t N = static_cast<size_t>(N_), in = static_cast<size_t>(sizes_[0]);
  std::vector<unsigned char> oneHot(N * in * es_, 0);
  for (size_t n = 0; n < N; ++n) {
    unsigned char* at = oneHot.data() + (n * in + static_cast<size_t>(inputs[n])) * es_;
    if (dt_ == DType::kBF16) {
      std::memcpy(at, &kBf16One, sizeof(kBf16One));
    } else if (dt_ == DType::kF16) {
      std::memcpy(at, &kFp16One, sizeof(kFp16One));
    } else {
      const float one = 1.0f;
      std::memcpy(at, &one, sizeof(one));
    }
  }
  ops_.upload(acts_.field(aOneHot), oneHot.data(), oneHot.size());
  ops_.upload(acts_.field(aTargets), targets, N * sizeof(int32_t));
}

const void* OpsMlpModel::value(const zero::ParamTable& p, int i, int block) const {
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

float* OpsMlpModel::grad(const zero::ParamTable& p, int i, int block) const {
  const size_t k = static_cast<size_t>(i);
  if (k >= p.grad.size() || p.grad[k] == nullptr) {
    throw InternalError(
        fmt::format("model: parameter '{}' has no gradient buffer "
                    "(ParamTable.grad) in backward of block {}",
                    params()[k].name, block));
  }
  return p.grad[k];
}

const void* OpsMlpModel::blockInput(int k) const {
  return k == 0 ? acts_.field(aOneHot) : acts_.field(kActFixed + k - 1);
}

void* OpsMlpModel::preact(int k) const { return z_.field(ckpt_ ? 0 : static_cast<size_t>(k)); }

void OpsMlpModel::linear(int k, const zero::ParamTable& p) {
  ops_.matmulForward(preact(k), blockInput(k), value(p, 2 * k, k), value(p, 2 * k + 1, k), N_,
                     sizes_[k], sizes_[k + 1], dt_);
}

float OpsMlpModel::forward(const int32_t* inputs, const int32_t* targets, int B, int T,
                           zero::ParamTable& p, zero::BlockHooks& hooks) {
  check(inputs, targets, B, T);
  haveForward_ = false;
  const int K = numBlocks(), N = B * T;
  allocate(N);
  uploadBatch(inputs, targets);
  valid_ = static_cast<int>(std::count_if(targets, targets + N, [](int32_t t) { return t >= 0; }));
  double sum = 0.0;
  for (int k = 0; k < K; ++k) {
    hooks.beforeForward(k);
    linear(k, p);
    const size_t nz = static_cast<size_t>(N) * sizes_[k + 1];
    if (k + 1 < K) {
      ops_.geluForward(acts_.field(kActFixed + k), preact(k), nz, dt_);
    } else {
      float* losses = acts_.as<float>(aLosses);
      ops_.crossEntropyForward(preact(k), losses, acts_.as<float>(aLse),
                               acts_.as<int32_t>(aTargets), N, sizes_[K], sizes_[K], dt_);
      sum = ops_.sum(losses, static_cast<size_t>(N));
    }
    hooks.afterForward(k);
  }
  haveForward_ = true;
  return valid_ > 0 ? static_cast<float>(sum / valid_) : 0.0f;
}

void OpsMlpModel::backward(float lossScale, zero::ParamTable& p, zero::BlockHooks& hooks) {
  if (!haveForward_) throw InternalError("mlp backward called without a forward");
  haveForward_ = false;  // the logits become dlogits in place: one backward per forward
  const int K = numBlocks(), N = N_;
  const int32_t* targets = acts_.as<int32_t>(aTargets);
  void *dz = scratch_.field(sDz), *dout = scratch_.field(sDout), *din = scratch_.field(sDin);
  for (int k = K - 1; k >= 0; --k) {
    hooks.beforeBackward(k);
    const int in = sizes_[k], out = sizes_[k + 1];
    const size_t nz = static_cast<size_t>(N) * out;
    if (ckpt_) {
      linear(k, p);
      if (k + 1 == K) {
        ops_.crossEntropyForward(preact(k), acts_.as<float>(aLosses), acts_.as<float>(aLse),
                                 targets, N, out, out, dt_);
      }
    }
    const void* dzk = dz;
    if (k + 1 == K) {
      const float scale = valid_ > 0 ? lossScale / static_cast<float>(valid_) : 0.0f;
      ops_.crossEntropyBackward(preact(k), acts_.as<float>(aLse), targets, N, out, out, scale, dt_);
      dzk = preact(k);
    } else {
      ops_.zero(dz, nz * es_);
      ops_.geluBackward(dz, preact(k), dout, nz, dt_);
    }
    float* gw = grad(p, 2 * k, k);
    float* gb = grad(p, 2 * k + 1, k);
    if (k > 0) {
      ops_.zero(din, static_cast<size_t>(N) * in * es_);
      ops_.matmulBackward(din, gw, gb, dzk, blockInput(k), value(p, 2 * k, k), N, in, out, dt_);
      std::swap(din, dout);
    } else {
      ops_.matmulBackward(nullptr, gw, gb, dzk, blockInput(0), value(p, 0, 0), N, in, out, dt_);
    }
    hooks.afterBackward(k);
  }
}

}  // namespace ds::runtime
