// 1-bit LAMB (zero/onebit_lamb.h) at stage 0 on 2-3 thread ranks over real gloo: its warm-up is
// bitwise our Lamb without bias correction; its compressed steps equal a plain re-computation of
// DeepSpeed's onebit/lamb.py math (scaling coefficients, error-compensated 1-bit average of the
// flat momentum, the fresh variance, the factor rules) within fp32 rounding, with every rank
// bitwise alike; its loss stays within the band stated below of Lamb's; its extra states
// round-trip through optimizerShard()/loadOptimizerState() and a resume in the warm-up continues
// bitwise; bad parameters are refused naming the key.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <random>

#include "comm/process_group.h"
#include "comm/registry.h"
#include "comm/store/hash_store.h"
#include "core/error.h"
#include "tests/support/spawn_ranks.h"
#include "tests/zero/zero_ranks.h"
#include "zero/onebit_lamb.h"

using namespace ds;
using namespace ds::zero;
using ds::test::ToyModel;
using ds::test::ZeroJob;

namespace {

OptimizerOptions lamb() {
  OptimizerOptions opt = test::toyOptimizer();
  opt.type = "Lamb";
  opt.beta2 = 0.99f;
  opt.biasCorrection = false;
  opt.maxCoeff = 0.3f;
  return opt;
}

OptimizerOptions oneBitLamb(int64_t freeze) {
  OptimizerOptions opt = lamb();
  opt.type = "OneBitLamb";
  opt.freezeStep = freeze;
  return opt;
}

ZeroJob job(OptimizerOptions opt, int steps) {
  ZeroJob out;
  out.z.stage = 0;
  out.steps = steps;
  out.gas = 2;
  out.optimizer = opt;
  return out;
}

bool verbose() { return std::getenv("DS_ZERO_TEST_VERBOSE") != nullptr; }

std::vector<float> randomVector(size_t count, unsigned seed, float sigma = 1.f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.f, sigma);
  std::vector<float> out(count);
  for (auto& value : out) value = dist(gen);
  return out;
}

float signOf(float value) { return value >= 0.f ? 1.f : -1.f; }

float rmsOf(const float* values, size_t count) {
  double sum = 0;
  for (size_t i = 0; i < count; ++i) sum += double(values[i]) * double(values[i]);
  return count ? float(std::sqrt(sum / double(count))) : 0.f;
}

// DeepSpeed's OnebitLamb written out plainly for every rank at once: the states all ranks share,
// each rank's worker error and each server chunk's error.
struct Reference {
  OptimizerOptions opt;
  std::vector<OptimizerPartition::Segment> params;
  int world;
  size_t count = 0, padded = 0;
  std::vector<float> weights, moment, variance, fresh;
  std::vector<float> freeze, lastFactor, scaling, applied;
  std::vector<std::vector<float>> workerError;
  std::vector<float> serverError;  // chunk j of the padded space is rank j's

  Reference(OptimizerOptions options, std::vector<OptimizerPartition::Segment> segments,
            int worldSize, const std::vector<float>& init)
      : opt(options), params(std::move(segments)), world(worldSize), weights(init) {
    for (const auto& param : params) count += param.size;
    const size_t quantum = size_t(world) * (world == 2 ? 8 : 24);
    padded = (count + quantum - 1) / quantum * quantum;
    moment.assign(count, 0.f);
    variance = fresh = moment;
    freeze.assign(params.size(), 0.f);
    lastFactor.assign(params.size(), 1.f);
    scaling.assign(params.size(), 0.f);
    applied = lastFactor;
    workerError.assign(size_t(world), std::vector<float>(padded, 0.f));
    serverError.assign(padded, 0.f);
  }

  // Warm-up: averaged gradient `grad`, LAMB without bias correction.
  void warmup(int64_t stepNo, const std::vector<float>& grad, float lr) {
    for (size_t index = 0; index < params.size(); ++index) {
      const auto& param = params[index];
      const float decay = param.decay ? opt.weightDecay : 0.f;
      double weightSq = 0, updateSq = 0;
      for (size_t i = param.offset; i < param.offset + param.size; ++i) {
        moment[i] = opt.beta1 * moment[i] + (1 - opt.beta1) * grad[i];
        variance[i] = opt.beta2 * variance[i] + (1 - opt.beta2) * grad[i] * grad[i];
        const float update = moment[i] / (std::sqrt(variance[i]) + opt.eps) + decay * weights[i];
        weightSq += double(weights[i]) * weights[i];
        updateSq += double(update) * update;
      }
      float coeff = 1.f;
      if (weightSq != 0 && updateSq != 0)
        coeff = std::min(
            std::max(float(std::sqrt(weightSq)) / float(std::sqrt(updateSq)), opt.minCoeff),
            opt.maxCoeff);
      if (coeff != 1.f)
        freeze[index] =
            float(double(opt.coeffBeta) * freeze[index] + (1.0 - double(opt.coeffBeta)) * coeff);
      applied[index] = coeff;
      for (size_t i = param.offset; i < param.offset + param.size; ++i) {
        const float update = moment[i] / (std::sqrt(variance[i]) + opt.eps) + decay * weights[i];
        weights[i] -= lr * coeff * update;
      }
    }
    if (stepNo == opt.freezeStep) fresh = variance;
  }

  // DeepSpeed's compressed_allreduce of every rank's buffer (padded with zeros) into out.
  std::vector<float> compressedAverage(const std::vector<std::vector<float>>& local) {
    const size_t chunk = padded / size_t(world);
    std::vector<std::vector<float>> compensated(static_cast<size_t>(world));
    std::vector<float> workerScale(static_cast<size_t>(world), 0.f);
    for (size_t rank = 0; rank < size_t(world); ++rank) {
      auto& values = compensated[rank];
      values = local[rank];
      values.resize(padded, 0.f);
      for (size_t i = 0; i < padded; ++i) values[i] += workerError[rank][i];
      workerScale[rank] = rmsOf(values.data(), padded);
      for (size_t i = 0; i < padded; ++i)
        workerError[rank][i] = values[i] - signOf(values[i]) * workerScale[rank];
    }
    std::vector<float> out(padded);
    for (size_t server = 0; server < size_t(world); ++server) {
      std::vector<float> sum(chunk, 0.f);
      for (size_t rank = 0; rank < size_t(world); ++rank)
        for (size_t i = 0; i < chunk; ++i)
          sum[i] += signOf(compensated[rank][server * chunk + i]) *
                    (workerScale[rank] * (1.f / float(world)));
      for (size_t i = 0; i < chunk; ++i) sum[i] += serverError[server * chunk + i];
      const float scale = rmsOf(sum.data(), chunk);
      for (size_t i = 0; i < chunk; ++i) {
        serverError[server * chunk + i] = sum[i] - signOf(sum[i]) * scale;
        out[server * chunk + i] = signOf(sum[i]) * scale;
      }
    }
    out.resize(count);
    return out;
  }

  // Compressed step: grads[rank] is that rank's own gradient.
  void compressed(const std::vector<std::vector<float>>& grads, float lr) {
    if (scaling[0] == 0.f) {
      std::vector<double> rms(params.size());
      double united = 0;
      for (size_t index = 0; index < params.size(); ++index) {
        double sum = 0;
        for (size_t i = 0; i < params[index].size; ++i) {
          const double value = moment[params[index].offset + i];
          sum += value * value;
        }
        rms[index] = std::sqrt(sum) / std::sqrt(double(params[index].size));
        united += rms[index] / double(params.size());
      }
      for (size_t index = 0; index < params.size(); ++index)
        scaling[index] = float(united / rms[index]);
    }
    std::vector<std::vector<float>> local(size_t(world), moment);
    for (size_t rank = 0; rank < size_t(world); ++rank)
      for (size_t index = 0; index < params.size(); ++index)
        for (size_t i = params[index].offset; i < params[index].offset + params[index].size; ++i)
          local[rank][i] =
              (moment[i] * opt.beta1 + grads[rank][i] * (1 - opt.beta1)) * scaling[index];
    const std::vector<float> average = compressedAverage(local);
    for (size_t index = 0; index < params.size(); ++index) {
      const auto& param = params[index];
      const float decay = param.decay ? opt.weightDecay : 0.f;
      double prelimSq = 0, updateSq = 0;
      float ratioMax = 0;
      for (size_t i = param.offset; i < param.offset + param.size; ++i) {
        const float last = moment[i];
        moment[i] = average[i] / scaling[index];
        const float implied = (moment[i] - last * opt.beta1) / (1 - opt.beta1);
        fresh[i] = fresh[i] * opt.beta2 + (1 - opt.beta2) * implied * implied;
        const float denom = std::sqrt(variance[i]) + opt.eps;
        const float prelim = moment[i] / denom;
        const float update = prelim + decay * weights[i];
        prelimSq += double(prelim) * prelim;
        updateSq += double(update) * update;
        ratioMax = std::max(ratioMax, denom / (std::sqrt(fresh[i]) + opt.eps));
      }
      double factor = ratioMax;
      if (decay > 0) {
        const double ratio = std::min(1.0, std::sqrt(prelimSq) / std::sqrt(updateSq));
        factor = factor * ratio + (1.0 - ratio);
      }
      factor = std::min(factor, double(opt.factorMax));
      factor = std::max(factor, double(opt.factorMin));
      factor = std::min(factor, lastFactor[index] * (1.0 + opt.factorThreshold));
      factor = std::max(factor, lastFactor[index] * (1.0 - opt.factorThreshold));
      lastFactor[index] = float(factor);
      applied[index] = float(freeze[index] * factor);
      for (size_t i = param.offset; i < param.offset + param.size; ++i) {
        const float update = moment[i] / (std::sqrt(variance[i]) + opt.eps) + decay * weights[i];
        weights[i] -= float(lr * freeze[index] * factor) * update;
      }
    }
  }
};

struct RankResult {
  std::vector<float> weights, moment, fresh;
  std::vector<OneBitLamb::Coeffs> coeffs;
  uint64_t bytes = 0;
};

void checkClose(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  INFO(what);
  REQUIRE(got.size() == want.size());
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (std::fabs(got[i] - want[i]) > 2e-5f * std::fabs(want[i]) + 1e-7f) ++bad;
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("onebit lamb: the compressed steps are DeepSpeed's math, every rank alike",
          "[multirank]") {
  // Parameters of several sizes, one without weight decay; freeze_step 3, then 4 compressed steps.
  const std::vector<OptimizerPartition::Segment> params = {
      {0, 40, true}, {40, 7, false}, {47, 130, true}, {177, 33, true}};
  const size_t count = 210;
  const int freeze = 3, steps = 7;
  const float lr = 0.02f;
  OptimizerOptions opt = oneBitLamb(freeze);
  opt.weightDecay = 0.05f;
  opt.factorThreshold = 0.3f;
  const auto init = randomVector(count, 1);
  for (int world : {2, 3}) {
    INFO("world " << world);
    // Step s's gradient on rank r (the warm-up takes their average, as the engine's allreduce).
    auto gradOf = [&](int stepNo, int rank) {
      auto grad = randomVector(count, 100 + unsigned(stepNo * 10 + rank), 0.1f);
      for (size_t i = 0; i < count; ++i) grad[i] += 0.05f * init[i];  // a consistent direction
      return grad;
    };
    auto averageOf = [&](int stepNo) {
      std::vector<float> sum(count, 0.f);
      for (int rank = 0; rank < world; ++rank) {
        const auto grad = gradOf(stepNo, rank);
        for (size_t i = 0; i < count; ++i) sum[i] += grad[i] / float(world);
      }
      return sum;
    };
    Reference ref(opt, params, world, init);
    for (int stepNo = 1; stepNo <= steps; ++stepNo) {
      if (stepNo <= freeze) {
        ref.warmup(stepNo, averageOf(stepNo), lr);
      } else {
        std::vector<std::vector<float>> grads;
        for (int rank = 0; rank < world; ++rank) grads.push_back(gradOf(stepNo, rank));
        ref.compressed(grads, lr);
      }
    }
    std::vector<RankResult> results(static_cast<size_t>(world));
    auto store = std::make_shared<comm::HashStore>();
    test::runRanks(world, [&](int rank) {
      comm::GroupOptions options;
      options.timeout = std::chrono::seconds(60);
      comm::ProcessGroup group(comm::createBackend("gloo", store, rank, world, options));
      OneBitLamb optimizer(opt, &group, params);
      std::vector<float> weights = init, moment(count, 0.f), variance(count, 0.f);
      for (int stepNo = 1; stepNo <= steps; ++stepNo) {
        REQUIRE(optimizer.exactGradients(stepNo) == (stepNo <= freeze));
        const auto grad = stepNo <= freeze ? averageOf(stepNo) : gradOf(stepNo, rank);
        optimizer.step(stepNo, grad.data(), 1.f, lr, weights.data(), moment.data(),
                       variance.data());
        optimizer.finishStep(stepNo, weights.data());
      }
      auto& out = results[size_t(rank)];
      out = {weights, moment, optimizer.expAvgSqFresh(), optimizer.coeffs(), optimizer.bytesSent()};
    });
    for (int rank = 1; rank < world; ++rank) {
      CHECK(results[size_t(rank)].weights == results[0].weights);
      CHECK(results[size_t(rank)].moment == results[0].moment);
      CHECK(results[size_t(rank)].fresh == results[0].fresh);
    }
    // One flat segment: (padded / world / 8 + 4) bytes to each peer, twice per compressed step.
    CHECK(results[0].bytes == uint64_t(steps - freeze) * 2 * uint64_t(world - 1) *
                                  (ref.padded / size_t(world) / 8 + 4));
    checkClose(results[0].weights, ref.weights, "weights");
    checkClose(results[0].moment, ref.moment, "exp_avg");
    checkClose(results[0].fresh, ref.fresh, "exp_avg_sq_fresh");
    for (size_t index = 0; index < params.size(); ++index) {
      INFO("parameter " << index);
      const auto& got = results[0].coeffs[index];
      CHECK(got.freeze == Approx(ref.freeze[index]).epsilon(1e-5));
      CHECK(got.freeze > 0.f);
      CHECK(got.scaling == Approx(ref.scaling[index]).epsilon(1e-5));
      CHECK(got.lastFactor == Approx(ref.lastFactor[index]).epsilon(1e-5));
      CHECK(got.applied == Approx(ref.applied[index]).epsilon(1e-5));
    }
    // The weights moved in the compressed phase (the comparison above is not vacuous).
    double moved = 0;
    for (size_t i = 0; i < count; ++i) moved += std::fabs(results[0].weights[i] - init[i]);
    CHECK(moved > 1e-3 * double(count));
  }
}

// Band: over 40 steps (freeze at 10) the losses stay within 10% of Lamb's (no bias correction) at
// world 2 and 3 (7.2% and 7.1% when written: see DS_ZERO_TEST_VERBOSE=1; one 1-bit scale for the
// toy's whole momentum is coarser than the Adams' per-tensor ones), and the run learns.
TEST_CASE("onebit lamb: Lamb exactly through freeze_step, then 1-bit momentum within the band",
          "[multirank]") {
  const ToyModel model(3, 12, false);
  for (int world : {2, 3}) {
    INFO("world " << world);
    const int steps = 40, freeze = 10;
    auto runs = test::runZeroJobs(
        model, world,
        {job(lamb(), steps), job(oneBitLamb(freeze), steps), job(oneBitLamb(steps), steps)});
    const auto &plain = runs[0], &onebit = runs[1], &warm = runs[2];
    CHECK(warm.losses == plain.losses);  // freeze_step >= steps: our Lamb, bitwise
    CHECK(warm.params == plain.params);
    CHECK(warm.compressedBytes == 0);
    for (int s = 0; s <= freeze; ++s) CHECK(onebit.losses[size_t(s)] == plain.losses[size_t(s)]);
    CHECK(onebit.losses != plain.losses);
    CHECK(onebit.ranksAgree);
    CHECK(onebit.compressedBytes > 0);
    const double diff = test::maxRelDiff(onebit.losses, plain.losses);
    if (verbose())
      fmt::print("world {} OneBitLamb: max rel loss diff vs Lamb {:.3g} (last {:.4f} vs {:.4f})\n",
                 world, diff, onebit.losses.back(), plain.losses.back());
    CHECK(diff <= 0.10);
    CHECK(onebit.losses.back() < 0.8 * onebit.losses.front());
  }
}

// The extra states (exp_avg_sq_fresh and the per-parameter coefficients) are saved by
// optimizerShard() and restored by loadOptimizerState(): a resume inside the warm-up continues
// the uninterrupted run bitwise, compressed steps included (no error buffer existed yet); a
// resume in the compressed phase restores every state bitwise (its errors start again from 0,
// as DeepSpeed's do).
TEST_CASE("onebit lamb: checkpointed states round-trip; a warm-up resume continues bitwise",
          "[multirank]") {
  const ToyModel model(3, 12, false);
  const int world = 2, total = 20, freeze = 8;
  auto full = test::runZeroJobs(model, world, {job(oneBitLamb(freeze), total)})[0];
  size_t psi = 0;
  for (const auto& param : model.params) psi += param.numel;
  for (int at : {5, 12}) {
    INFO("saved at step " << at);
    std::mutex mutex;
    std::map<std::string, std::vector<float>> saved;
    ZeroJob first = job(oneBitLamb(freeze), at);
    first.finish = [&](ZeroEngine& engine, int) {
      auto shard = engine.optimizerShard();
      std::lock_guard<std::mutex> lock(mutex);
      for (const auto& tensor : shard) {
        auto& values = saved[tensor.name];
        values.resize(psi, 0.f);
        std::memcpy(values.data() + tensor.offset, tensor.data.data(), tensor.size * sizeof(float));
      }
    };
    test::runZeroJobs(model, world, {first});
    for (const char* name : {"fp32", "exp_avg", "exp_avg_sq", "exp_avg_sq_fresh",
                             "lamb_coeff_freeze", "lamb_last_factor", "lamb_scaling_coeff"})
      CHECK(saved.count(name) == 1);
    auto reader = [&](size_t offset, size_t size, const std::string& name, float* out) {
      const auto& values = saved.at(name);
      std::memcpy(out, values.data() + offset, size * sizeof(float));
    };
    std::map<std::string, std::vector<float>> reloaded;
    ZeroJob resumed = job(oneBitLamb(freeze), total);
    resumed.startStep = at;
    resumed.setup = [&](ZeroEngine& engine, int rank) {
      engine.loadOptimizerState(reader, at);
      if (rank != 0) return;
      for (const auto& tensor : engine.optimizerShard()) {
        auto& values = reloaded[tensor.name];
        values.resize(psi, 0.f);
        std::memcpy(values.data() + tensor.offset, tensor.data.data(), tensor.size * sizeof(float));
      }
    };
    auto rest = test::runZeroJobs(model, world, {resumed})[0];
    CHECK(reloaded == saved);
    const std::vector<double> tail(full.losses.begin() + at, full.losses.end());
    if (at < freeze) {
      CHECK(rest.losses == tail);
      CHECK(rest.params == full.params);
    } else {
      CHECK(test::maxRelDiff(rest.losses, tail) <= 0.05);
    }
    CHECK(rest.ranksAgree);
  }
}

TEST_CASE("onebit lamb: bad parameters are refused naming the key", "[unit]") {
  const ToyModel model(2, 8, false);
  auto error = [&](ZeroOptions zero, OptimizerOptions opt) -> std::string {
    try {
      ZeroEngine engine(model.params, model.L, nullptr, zero, opt);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "(no error)";
  };
  ZeroOptions stage0, stage1;
  stage1.stage = 1;
  CHECK(error(stage1, oneBitLamb(5)) ==
        "optimizer.type OneBitLamb: needs zero_optimization.stage 0 (stage is 1), as in DeepSpeed");
  CHECK(error(stage0, oneBitLamb(0)) ==
        "optimizer.params.freeze_step: OneBitLamb needs an integer >= 1 (got 0)");
  auto opt = oneBitLamb(5);
  opt.factorThreshold = 1.5f;
  CHECK(error(stage0, opt) ==
        "optimizer.params.factor_threshold: OneBitLamb needs a number in [0, 1) (got 1.5)");
  opt = oneBitLamb(5);
  opt.coeffBeta = 1.f;
  CHECK(error(stage0, opt) ==
        "optimizer.params.coeff_beta: OneBitLamb needs a number in [0, 1) (got 1)");
  CHECK(error(stage0, oneBitLamb(5)) == "(no error)");
}
