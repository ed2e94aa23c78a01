// TimedHooks: a BlockHooks decorator that forwards to the parameter owner (ZeroEngine) and adds
// the wall time spent inside its hooks (stage-3 gathers, gradient bucket reductions) to a
// counter, so the trainer can report that time as communication rather than forward/backward.
// Not an owner; not thread-safe (the training thread calls the hooks).
#pragma once

#include <chrono>

#include "zero/param_table.h"

namespace ds::runtime {

class TimedHooks : public zero::BlockHooks {
 public:
  explicit TimedHooks(zero::BlockHooks& inner) : inner_(inner) {}

  void beforeForward(int b) override {
    timed([&] { inner_.beforeForward(b); });
  }
  void afterForward(int b) override {
    timed([&] { inner_.afterForward(b); });
  }
  void beforeBackward(int b) override {
    timed([&] { inner_.beforeBackward(b); });
  }
  void afterBackward(int b) override {
    timed([&] { inner_.afterBackward(b); });
  }
  void beforeBackwardPart(int b, int part) override {
    timed([&] { inner_.beforeBackwardPart(b, part); });
  }

  // Milliseconds spent in hooks since the last take().
  double take() {
    double v = ms_;
    ms_ = 0;
    return v;
  }

 private:
  template <class F>
  void timed(F&& f) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    ms_ += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }

  zero::BlockHooks& inner_;
  double ms_ = 0;
};

}  // namespace ds::runtime
