// OneBitLamb: see onebit_lamb.h. Sums over a parameter run in fixed blocks of kBlock elements (in
// parallel), each block serially in double, the blocks added in order: the same bits on every rank
// and at any thread count.
#include "zero/onebit_lamb.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "core/error.h"
#include "zero/cpu_lamb.h"

namespace ds::zero {
namespace {

constexpr size_t kBlock = size_t(1) << 16;

// Per block of [0, count): fn(begin, end, partial) fills partial[0..width); returns the blocks'
// partials added in block order (max for the entries flagged in maxMask).
template <size_t Width, class Fn>
std::array<double, Width> blockReduce(size_t count, Fn visit, unsigned maxMask = 0) {
  const size_t blocks = (count + kBlock - 1) / kBlock;
  std::vector<std::array<double, Width>> partial(blocks);
#pragma omp parallel for schedule(static) if (blocks > 1)
  for (long block = 0; block < long(blocks); ++block) {
    const size_t begin = size_t(block) * kBlock;
    partial[size_t(block)].fill(0.0);
    visit(begin, std::min(count, begin + kBlock), partial[size_t(block)]);
  }
  std::array<double, Width> total{};
  for (const auto& part : partial)
    for (size_t k = 0; k < Width; ++k)
      total[k] = (maxMask >> k) & 1u ? std::max(total[k], part[k]) : total[k] + part[k];
  return total;
}

void checkKey(bool valid, const char* key, const std::string& expected, double value) {
  if (!valid)
    throw ConfigError(
        fmt::format("optimizer.params.{}: OneBitLamb needs {} (got {})", key, expected, value));
}

}  // namespace

OneBitLamb::OneBitLamb(const OptimizerOptions& options, comm::ProcessGroup* group,
                       std::vector<OptimizerPartition::Segment> params)
    : opt_(options), params_(std::move(params)), allreduce_(group, [&] {
        size_t sum = 0;
        for (const auto& param : params_) sum += param.size;
        count_ = sum;
        return std::vector<size_t>{sum};
      }()) {
  DS_CHECK(opt_.type == "OneBitLamb", "OneBitLamb for optimizer type {}", opt_.type);
  if (opt_.freezeStep < 1)
    throw ConfigError(
        fmt::format("optimizer.params.freeze_step: OneBitLamb needs an integer >= 1 (got {})",
                    opt_.freezeStep));
  checkKey(opt_.coeffBeta >= 0 && opt_.coeffBeta < 1, "coeff_beta", "a number in [0, 1)",
           opt_.coeffBeta);
  checkKey(opt_.factorMin > 0, "factor_min", "a number > 0", opt_.factorMin);
  checkKey(opt_.factorMax >= opt_.factorMin, "factor_max", "a number >= factor_min",
           opt_.factorMax);
  checkKey(opt_.factorThreshold >= 0 && opt_.factorThreshold < 1, "factor_threshold",
           "a number in [0, 1)", opt_.factorThreshold);
  checkKey(opt_.minCoeff <= opt_.maxCoeff, "min_coeff", "a number <= max_coeff", opt_.minCoeff);
  coeffs_.assign(params_.size(), Coeffs{});
  fresh_.assign(count_, 0.f);
  lastStep_.assign(count_, 0.f);
}

void OneBitLamb::step(int64_t stepNo, const float* grads, float gradScale, float learningRate,
                      float* params, float* expAvg, float* expAvgSq) {
  if (stepNo <= opt_.freezeStep)
    return warmupStep(stepNo, grads, gradScale, learningRate, params, expAvg, expAvgSq);
  compressedStep(grads, gradScale, learningRate, params, expAvg, expAvgSq);
}

// Plain LAMB per parameter (independent: in parallel over parameters).
void OneBitLamb::warmupStep(int64_t stepNo, const float* grads, float gradScale, float learningRate,
                            float* params, float* expAvg, float* expAvgSq) {
  const double keepCoeff = 1.0 - double(opt_.coeffBeta);
#pragma omp parallel for schedule(dynamic)
  for (long index = 0; index < long(params_.size()); ++index) {
    const auto& param = params_[size_t(index)];
    if (param.size == 0) continue;
    const LambConfig config{learningRate,
                            opt_.beta1,
                            opt_.beta2,
                            opt_.eps,
                            param.decay ? opt_.weightDecay : 0.f,
                            opt_.maxCoeff,
                            opt_.minCoeff,
                            /*biasCorrection=*/false,
                            /*epsInsideSqrt=*/false};
    const size_t off = param.offset;
    const float ratio = lambStep(config, stepNo, gradScale, params + off, grads + off, expAvg + off,
                                 expAvgSq + off, param.size);
    Coeffs& coeff = coeffs_[size_t(index)];
    if (ratio != 1.f)
      coeff.freeze = float(double(opt_.coeffBeta) * coeff.freeze + keepCoeff * double(ratio));
    coeff.applied = ratio;
  }
  if (stepNo == opt_.freezeStep) std::copy(expAvgSq, expAvgSq + count_, fresh_.begin());
}

// DeepSpeed's scaling_coeff: the mean over parameters of rms(m), over this parameter's rms(m).
// A parameter with rms 0 (DeepSpeed: a division by zero) keeps the scaling 1.
void OneBitLamb::setScaling(const float* expAvg) {
  std::vector<double> rms(params_.size(), 0.0);
  double sum = 0;
  size_t counted = 0;
  for (size_t index = 0; index < params_.size(); ++index) {
    const auto& param = params_[index];
    if (param.size == 0) continue;
    const float* values = expAvg + param.offset;
    const auto squares = blockReduce<1>(param.size, [&](size_t begin, size_t end, auto& part) {
      for (size_t i = begin; i < end; ++i) part[0] += double(values[i]) * double(values[i]);
    });
    rms[index] = std::sqrt(squares[0]) / std::sqrt(double(param.size));
    sum += rms[index];
    ++counted;
  }
  const double united = counted ? sum / double(counted) : 1.0;
  for (size_t index = 0; index < params_.size(); ++index)
    coeffs_[index].scaling = rms[index] > 0 && united > 0 ? float(united / rms[index]) : 1.f;
  scaled_ = true;
}

double OneBitLamb::factorOf(size_t index, double prelimSq, double updateSq, double ratioMax) const {
  double factor = ratioMax;
  if (params_[index].decay && opt_.weightDecay > 0.f) {
    const double updateNorm = std::sqrt(updateSq);
    const double ratio = updateNorm > 0 ? std::min(1.0, std::sqrt(prelimSq) / updateNorm) : 1.0;
    factor = factor * ratio + (1.0 - ratio);
  }
  factor = std::max(std::min(factor, double(opt_.factorMax)), double(opt_.factorMin));
  const double last = coeffs_[index].lastFactor, threshold = opt_.factorThreshold;
  factor = std::min(factor, last * (1.0 + threshold));
  return std::max(factor, last * (1.0 - threshold));
}

void OneBitLamb::compressedStep(const float* grads, float gradScale, float learningRate,
                                float* params, float* expAvg, const float* expAvgSq) {
  if (!scaled_) setScaling(expAvg);
  const float beta1 = opt_.beta1, keep1 = 1.f - beta1, beta2 = opt_.beta2, keep2 = 1.f - beta2;
  const float eps = opt_.eps;
  for (size_t index = 0; index < params_.size(); ++index) {
    const auto& param = params_[index];
    const float scaling = coeffs_[index].scaling;
    float* moment = expAvg + param.offset;
    float* last = lastStep_.data() + param.offset;
    const float* grad = grads + param.offset;
#pragma omp parallel for simd schedule(static) if (param.size > kBlock)
    for (long i = 0; i < long(param.size); ++i) {
      last[i] = moment[i];
      moment[i] = (moment[i] * beta1 + grad[i] * gradScale * keep1) * scaling;
    }
  }
  allreduce_.run(expAvg);
  for (size_t index = 0; index < params_.size(); ++index) {
    const auto& param = params_[index];
    if (param.size == 0) continue;
    const float scaling = coeffs_[index].scaling;
    const float decay = param.decay ? opt_.weightDecay : 0.f;
    float* moment = expAvg + param.offset;
    float* fresh = fresh_.data() + param.offset;
    float* weights = params + param.offset;
    const float* last = lastStep_.data() + param.offset;
    const float* variance = expAvgSq + param.offset;
    // [0] ||m / denom||^2, [1] ||u||^2, [2] max(denom / denom_fresh)
    const auto sums = blockReduce<3>(
        param.size,
        [&](size_t begin, size_t end, auto& part) {
          for (size_t i = begin; i < end; ++i) {
            const float mom = moment[i] / scaling;
            moment[i] = mom;
            const float implied = (mom - last[i] * beta1) / keep1;
            fresh[i] = fresh[i] * beta2 + keep2 * implied * implied;
            const float denom = std::sqrt(variance[i]) + eps;
            const float prelim = mom / denom;
            const float update = prelim + decay * weights[i];
            part[0] += double(prelim) * double(prelim);
            part[1] += double(update) * double(update);
            part[2] = std::max(part[2], double(denom / (std::sqrt(fresh[i]) + eps)));
          }
        },
        /*maxMask=*/4u);
    Coeffs& coeff = coeffs_[index];
    const double factor = factorOf(index, sums[0], sums[1], sums[2]);
    coeff.lastFactor = float(factor);
    coeff.applied = float(double(coeff.freeze) * factor);
    const float stepSize = float(-double(learningRate) * double(coeff.freeze) * factor);
#pragma omp parallel for simd schedule(static) if (param.size > kBlock)
    for (long i = 0; i < long(param.size); ++i) {
      const float update = moment[i] / (std::sqrt(variance[i]) + eps) + decay * weights[i];
      weights[i] = weights[i] + stepSize * update;
    }
  }
}

void OneBitLamb::restore(int64_t /*stepsDone*/, const float* /*params*/) {
  allreduce_.resetErrors();
}

std::vector<ZeroEngine::ShardTensor> OneBitLamb::extraStates() const {
  std::vector<ZeroEngine::ShardTensor> out;
  out.push_back({"exp_avg_sq_fresh", 0, count_, fresh_});
  for (size_t index = 0; index < params_.size(); ++index) {
    const auto& param = params_[index];
    if (param.size == 0) continue;
    const Coeffs& coeff = coeffs_[index];
    out.push_back({"lamb_coeff_freeze", param.offset, 1, {coeff.freeze}});
    out.push_back({"lamb_last_factor", param.offset, 1, {coeff.lastFactor}});
    out.push_back({"lamb_scaling_coeff", param.offset, 1, {coeff.scaling}});
  }
  return out;
}

void OneBitLamb::loadExtraStates(const RangeReader& readRange) {
  readRange(0, count_, "exp_avg_sq_fresh", fresh_.data());
  for (size_t index = 0; index < params_.size(); ++index) {
    const auto& param = params_[index];
    if (param.size == 0) continue;
    Coeffs& coeff = coeffs_[index];
    readRange(param.offset, 1, "lamb_coeff_freeze", &coeff.freeze);
    readRange(param.offset, 1, "lamb_last_factor", &coeff.lastFactor);
    readRange(param.offset, 1, "lamb_scaling_coeff", &coeff.scaling);
    scaled_ = coeff.scaling != 0.f;
  }
}

}  // namespace ds::zero
