// LR schedule formulas, transcribed from the behaviour of deepspeed/runtime/lr_schedules.py
// (WarmupLR._get_gamma, WarmupDecayLR._get_gamma, WarmupCosineLR.get_lr_ratio).
#include "runtime/optim/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/error.h"

namespace ds::runtime {
namespace {

class ConstantLr : public LrSchedule {
 public:
  explicit ConstantLr(double lr) : lr_(lr) {}
  double lrAt(int64_t) const override { return lr_; }

 private:
  double lr_;
};

// Warmup fraction in [0, 1) for iteration < warmup steps (log or linear, as DeepSpeed).
double warmupGamma(int64_t it, int64_t warmup, bool linear) {
  if (linear) return double(it) / double(warmup);
  return std::log(double(it + 1)) / std::log(double(warmup));
}

class WarmupLr : public LrSchedule {
 public:
  WarmupLr(const SchedulerConfig& c, bool decay)
      : minLr_(c.warmupMinLr),
        deltaLr_(c.warmupMaxLr - c.warmupMinLr),
        warmup_(std::max<int64_t>(2, c.warmupNumSteps)),
        total_(c.totalNumSteps),
        linear_(c.warmupType == "linear"),
        decay_(decay) {}

  double lrAt(int64_t it) const override {
    if (it < 0) return minLr_;
    return minLr_ + deltaLr_ * gamma(it);
  }

 private:
  double gamma(int64_t it) const {
    if (it < warmup_) return warmupGamma(it, warmup_, linear_);
    if (!decay_) return 1.0;
    return std::max(0.0, double(total_ - it) / std::max(1.0, double(total_ - warmup_)));
  }

  double minLr_, deltaLr_;
  int64_t warmup_, total_;
  bool linear_, decay_;
};

class WarmupCosineLr : public LrSchedule {
 public:
  WarmupCosineLr(const SchedulerConfig& c, double baseLr)
      : baseLr_(baseLr),
        warmupMinRatio_(c.warmupMinRatio),
        cosMinRatio_(c.cosMinRatio),
        warmup_(std::max<int64_t>(2, c.warmupNumSteps)),
        total_(c.totalNumSteps),
        linear_(c.warmupType == "linear") {}

  double lrAt(int64_t it) const override { return it < 0 ? 0.0 : baseLr_ * ratio(it); }

 private:
  double ratio(int64_t it) const {
    if (it < warmup_) {
      double r = warmupGamma(it, warmup_, linear_);
      return warmupMinRatio_ + r * (1.0 - warmupMinRatio_);
    }
    // total <= warmup (a run shorter than its warmup, derived total): no decay phase to speak of.
    if (total_ <= warmup_) return cosMinRatio_;
    double realLast = double(it - warmup_ + 1), realTotal = double(total_ - warmup_);
    double r = (1 + std::cos(std::numbers::pi * realLast / realTotal)) / 2;
    return std::max(0.0, cosMinRatio_ + (1.0 - cosMinRatio_) * r);
  }

  double baseLr_, warmupMinRatio_, cosMinRatio_;
  int64_t warmup_, total_;
  bool linear_;
};

void check(bool ok, const std::string& msg) {
  if (!ok) throw ConfigError(msg);
}

}  // namespace

std::unique_ptr<LrSchedule> makeLrSchedule(const SchedulerConfig& c, double baseLr) {
  if (c.type.empty()) return std::make_unique<ConstantLr>(baseLr);
  check(c.warmupType == "log" || c.warmupType == "linear",
        "scheduler.params.warmup_type: expected 'log' or 'linear', got '" + c.warmupType + "'");
  check(c.warmupNumSteps >= 0, "scheduler.params.warmup_num_steps: must be >= 0");
  if (c.type == "WarmupLR") return std::make_unique<WarmupLr>(c, false);
  if (c.type == "WarmupDecayLR" || c.type == "WarmupCosineLR") {
    check(c.totalNumSteps > 0,
          "scheduler.params.total_num_steps: required by " + c.type + " and must be > 0");
    if (c.type == "WarmupDecayLR") return std::make_unique<WarmupLr>(c, true);
    return std::make_unique<WarmupCosineLr>(c, baseLr);
  }
  throw ConfigError("scheduler.type: unknown scheduler '" + c.type +
                    "' (expected WarmupLR, WarmupDecayLR or WarmupCosineLR)");
}

}  // namespace ds::runtime
