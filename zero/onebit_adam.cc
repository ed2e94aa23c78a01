// CompressedAdam: see onebit_adam.h.
#include "zero/onebit_adam.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>

#include <fmt/format.h>

#include "core/error.h"

namespace ds::zero {
namespace {

void checkPositive(int64_t value, const char* key, const std::string& type) {
  if (value < 1)
    throw ConfigError(
        fmt::format("optimizer.params.{}: {} needs an integer >= 1 (got {})", key, type, value));
}

// The elementwise kernels, cloned for AVX-512 and AVX2 (picked at load time; neither implies FMA,
// so every clone rounds exactly as the baseline does).
__attribute__((target_clones("avx512f", "avx2", "default"))) void momentumKernel(
    size_t begin, size_t end, const float* grads, float gradScale, float beta1, float beta2,
    float* expAvg, float* expAvgSq) {
  const float keep1 = 1.f - beta1, keep2 = 1.f - beta2;
  if (!expAvgSq) {
#pragma omp simd
    for (size_t i = begin; i < end; ++i)
      expAvg[i] = expAvg[i] * beta1 + grads[i] * gradScale * keep1;
    return;
  }
#pragma omp simd
  for (size_t i = begin; i < end; ++i) {
    const float grad = grads[i] * gradScale;
    expAvg[i] = expAvg[i] * beta1 + grad * keep1;
    expAvgSq[i] = expAvgSq[i] * beta2 + grad * grad * keep2;
  }
}

// p += decoupled * p ; p += stepSize * m / (sqrt(v) * bc2RsqrtInv + eps): AdamW's form.
__attribute__((target_clones("avx512f", "avx2", "default"))) void updateKernel(
    size_t begin, size_t end, float decoupled, float bc2RsqrtInv, float stepSize, float eps,
    float* params, const float* expAvg, const float* expAvgSq) {
#pragma omp simd
  for (size_t i = begin; i < end; ++i) {
    const float denom = std::sqrt(expAvgSq[i]) * bc2RsqrtInv + eps;
    float param = params[i];
    param = param + param * decoupled;
    params[i] = param + (expAvg[i] / denom) * stepSize;
  }
}

size_t total(const std::vector<size_t>& sizes) {
  size_t sum = 0;
  for (size_t size : sizes) sum += size;
  return sum;
}

}  // namespace

CompressedAdam::CompressedAdam(const OptimizerOptions& options, comm::ProcessGroup* group,
                               std::vector<size_t> segments,
                               std::vector<OptimizerPartition::Run> decayRuns)
    : opt_(options),
      zeroOne_(options.type == "ZeroOneAdam"),
      count_(total(segments)),
      decayRuns_(std::move(decayRuns)),
      allreduce_(group, std::move(segments)) {
  DS_CHECK(opt_.compressed(), "CompressedAdam for optimizer type {}", opt_.type);
  if (zeroOne_) {
    checkPositive(opt_.varFreezeStep, "var_freeze_step", opt_.type);
    checkPositive(opt_.varUpdateScaler, "var_update_scaler", opt_.type);
    checkPositive(opt_.localStepScaler, "local_step_scaler", opt_.type);
    checkPositive(opt_.localStepClipper, "local_step_clipper", opt_.type);
  } else {
    checkPositive(opt_.freezeStep, "freeze_step", opt_.type);
  }
  if (decayRuns_.empty()) decayRuns_.push_back({0, count_});
  scratch_.assign(count_, 0.f);
}

bool CompressedAdam::exactGradients(int64_t stepNo) const {
  if (!zeroOne_) return stepNo <= opt_.freezeStep;
  return !frozen_ && stepNo % varInterval_ == 0;
}

bool CompressedAdam::plainAdam(int64_t stepNo) const {
  return exactGradients(stepNo) && varSteps_ == stepNo - 1;
}

CompressedAdam::Coeffs CompressedAdam::coeffs(int64_t stepNo, int64_t varSteps,
                                              float learningRate) const {
  const double bc1 = opt_.biasCorrection ? 1.0 - std::pow(double(opt_.beta1), double(stepNo)) : 1.0;
  const double bc2 =
      opt_.biasCorrection ? 1.0 - std::pow(double(opt_.beta2), double(varSteps)) : 1.0;
  DS_CHECK(bc1 > 0 && bc2 > 0, "{} step {} with {} variance updates", opt_.type, stepNo, varSteps);
  return {float(-double(learningRate) / bc1), float(1.0 / std::sqrt(bc2)),
          -learningRate * opt_.weightDecay};
}

// fn(begin, end, decay) over [0, count_), split where weight decay starts or stops.
template <class Fn>
void CompressedAdam::forEachRun(Fn visit) const {
  size_t pos = 0;
  for (const auto& run : decayRuns_) {
    if (pos < run.begin) visit(pos, run.begin, false);
    visit(run.begin, run.end, true);
    pos = run.end;
  }
  if (pos < count_) visit(pos, count_, false);
}

// fn(begin, end, decay) over [first, last), split where weight decay starts or stops.
template <class Fn>
void CompressedAdam::forEachRunIn(size_t first, size_t last, Fn visit) const {
  auto run = std::upper_bound(decayRuns_.begin(), decayRuns_.end(), first,
                              [](size_t pos, const auto& item) { return pos < item.end; });
  size_t pos = first;
  for (; pos < last && run != decayRuns_.end() && run->begin < last; ++run) {
    if (pos < run->begin) visit(pos, run->begin, false);
    const size_t begin = std::max(pos, run->begin), end = std::min(last, run->end);
    visit(begin, end, true);
    pos = end;
  }
  if (pos < last) visit(pos, last, false);
}

// m = beta1 m + (1 - beta1) g (and v likewise when expAvgSq is given), g = grads * gradScale,
// over [begin, end) in the calling thread.
void CompressedAdam::momentumRange(size_t begin, size_t end, const float* grads, float gradScale,
                                   float* expAvg, float* expAvgSq) const {
  momentumKernel(begin, end, grads, gradScale, opt_.beta1, opt_.beta2, expAvg, expAvgSq);
}

void CompressedAdam::momentum(const float* grads, float gradScale, float* expAvg, float* expAvgSq) {
  constexpr long kPiece = 1L << 15;
  const long pieces = (long(count_) + kPiece - 1) / kPiece;
#pragma omp parallel for schedule(static)
  for (long piece = 0; piece < pieces; ++piece)
    momentumRange(size_t(piece * kPiece), std::min(count_, size_t((piece + 1) * kPiece)), grads,
                  gradScale, expAvg, expAvgSq);
}

// p += -lr*wd*p (when decay) ; p += stepSize * m / (sqrt(v)/sqrt(bc2) + eps): AdamW's form, over
// [begin, end) in the calling thread.
void CompressedAdam::updateRange(size_t begin, size_t end, bool decay, const Coeffs& coeff,
                                 float* params, const float* expAvg, const float* expAvgSq) const {
  updateKernel(begin, end, decay ? coeff.decoupled : 0.f, coeff.bc2RsqrtInv, coeff.stepSize,
               opt_.eps, params, expAvg, expAvgSq);
}

void CompressedAdam::applyUpdate(const Coeffs& coeff, float* params, const float* expAvg,
                                 const float* expAvgSq) {
  forEachRun([&](size_t begin, size_t end, bool decay) {
    constexpr size_t kPiece = size_t(1) << 15;
    const long pieces = long((end - begin + kPiece - 1) / kPiece);
#pragma omp parallel for schedule(static)
    for (long piece = 0; piece < pieces; ++piece) {
      const size_t from = begin + size_t(piece) * kPiece;
      updateRange(from, std::min(end, from + kPiece), decay, coeff, params, expAvg, expAvgSq);
    }
  });
}

void CompressedAdam::step(int64_t stepNo, const float* grads, float gradScale, float learningRate,
                          float* params, float* expAvg, float* expAvgSq) {
  DS_CHECK(!plainAdam(stepNo), "{} step {} is plain Adam", opt_.type, stepNo);
  if (!zeroOne_) {  // 1-bit Adam after freeze_step: local momentum, 1-bit averaged
    // Fused into the allreduce's passes, block by block while the block is in cache: the
    // momentum update before its compression, the parameter update after its decoding.
    const Coeffs coeff = coeffs(stepNo, varSteps_, learningRate);
    comm::CompressedAllreduce::Hooks hooks;
    hooks.before = [&](size_t begin, size_t end) {
      momentumRange(begin, end, grads, gradScale, expAvg, nullptr);
    };
    hooks.after = [&](size_t begin, size_t end) {
      forEachRunIn(begin, end, [&](size_t from, size_t upto, bool decay) {
        updateRange(from, upto, decay, coeff, params, expAvg, expAvgSq);
      });
    };
    allreduce_.run(expAvg, hooks);
    return;
  }
  if (!frozen_ && exactGradients(stepNo)) {  // a variance step after 1-bit steps
    momentum(grads, gradScale, expAvg, expAvgSq);
    applyUpdate(coeffs(stepNo, varSteps_ + 1, learningRate), params, expAvg, expAvgSq);
    return;
  }
  if (!frozen_) {  // the 1-bit averaged gradient updates the momentum only
    for (size_t i = 0; i < count_; ++i) scratch_[i] = grads[i] * gradScale;
    allreduce_.run(scratch_.data());
    momentum(scratch_.data(), 1.f, expAvg, nullptr);
    applyUpdate(coeffs(stepNo, varSteps_, learningRate), params, expAvg, expAvgSq);
    return;
  }
  // A local step: own gradient, own parameters, synchronised every local-step interval.
  const Coeffs local = coeffs(stepNo, varSteps_, learningRate);
  momentum(grads, gradScale, expAvg, nullptr);
  applyUpdate(local, params, expAvg, expAvgSq);
  localLrs_ += -double(local.stepSize);
  if (stepNo % localInterval_ == 0) localSync(params, expAvg, expAvgSq, stepNo);
}

// DeepSpeed's momentum_accumulator round: the updates since the last sync, scaled back by the
// Adam denominator, are 1-bit averaged; the momentum becomes -average / sum(lr); every rank's
// parameters become anchor + average / denominator (bitwise alike: the anchor is shared).
void CompressedAdam::localSync(float* params, float* expAvg, const float* expAvgSq,
                               int64_t stepNo) {
  const float bc2RsqrtInv = coeffs(stepNo, varSteps_, 1.f).bc2RsqrtInv, eps = opt_.eps;
  for (size_t i = 0; i < count_; ++i)
    scratch_[i] = (params[i] - anchor_[i]) * (std::sqrt(expAvgSq[i]) * bc2RsqrtInv + eps);
  allreduce_.run(scratch_.data());
  const float invLrs = float(1.0 / localLrs_);
  for (size_t i = 0; i < count_; ++i) {
    expAvg[i] = -scratch_[i] * invLrs;
    params[i] = anchor_[i] + scratch_[i] / (std::sqrt(expAvgSq[i]) * bc2RsqrtInv + eps);
  }
  anchor_.assign(params, params + count_);
  localLrs_ = 0;
}

void CompressedAdam::finishStep(int64_t stepNo, const float* params) {
  if (!zeroOne_) {
    if (stepNo <= opt_.freezeStep) ++varSteps_;
    return;
  }
  if (frozen_) {
    if (++localCounter_ == opt_.localStepScaler) {
      localCounter_ = 0;
      localInterval_ = std::min(opt_.localStepClipper, localInterval_ * 2);
    }
    return;
  }
  if (stepNo % varInterval_ == 0) {
    ++varSteps_;
    if (++varCounter_ == opt_.varUpdateScaler) {
      varCounter_ = 0;
      varInterval_ *= 2;
    }
  }
  if (stepNo >= opt_.varFreezeStep) {  // the errors held gradients; from now on, updates
    frozen_ = true;
    allreduce_.resetErrors();
    if (params) anchor_.assign(params, params + count_);
    localLrs_ = 0;
  }
}

void CompressedAdam::restore(int64_t stepsDone, const float* params) {
  varSteps_ = varCounter_ = localCounter_ = 0;
  varInterval_ = localInterval_ = 1;
  frozen_ = false;
  for (int64_t stepNo = 1; stepNo <= stepsDone; ++stepNo) finishStep(stepNo, nullptr);
  allreduce_.resetErrors();
  localLrs_ = 0;
  if (frozen_) anchor_.assign(params, params + count_);
}

}  // namespace ds::zero
