// Monitor: a sink for DeepSpeed-style events (name, value, step), e.g. ("Train/Samples/train_loss",
// 2.3, 1200). MonitorSet fans out to the enabled tensorboard / csv_monitor sinks of the config;
// only rank 0 writes (other ranks get an empty set). Not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/config/plan.h"

namespace ds::runtime {

struct MonitorEvent {
  std::string name;
  double value = 0;
  int64_t step = 0;
};

class Monitor {
 public:
  virtual ~Monitor() = default;
  virtual void write(const std::vector<MonitorEvent>& events) = 0;
  virtual void flush() {}
  // Where this sink writes, for the end-of-run lines: "csv_monitor <folder>", "tensorboard <file>".
  virtual std::string where() const { return {}; }
};

class MonitorSet : public Monitor {
 public:
  // Rank != 0 or no block enabled: empty (write is a no-op).
  MonitorSet(const DsConfig& cfg, int rank);
  void write(const std::vector<MonitorEvent>& events) override;
  void flush() override;
  bool empty() const { return sinks_.empty(); }
  // Each sink's where(), in the config's order (empty on other ranks and without sinks).
  std::vector<std::string> sinkLocations() const;

 private:
  std::vector<std::unique_ptr<Monitor>> sinks_;
};

// The events DeepSpeed's engine writes per step (samples = global samples seen so far):
// Train/Samples/train_loss, Train/Samples/lr, Train/Samples/loss_scale (fp16 only upstream;
// always here), plus Train/Samples/grad_norm.
std::vector<MonitorEvent> trainEvents(int64_t samples, double loss, double lr, double lossScale,
                                      double gradNorm);

// With wall_clock_breakdown, DeepSpeed's timer events (ms): Train/Samples/elapsed_time_ms_forward,
// _backward, _backward_allreduce (our comm time) and _step (our optimizer time).
std::vector<MonitorEvent> timingEvents(int64_t samples, double fwdMs, double bwdMs, double commMs,
                                       double optimMs);

}  // namespace ds::runtime
