// MonitorSet and the per-step event names; see monitor.h.
#include "runtime/monitor/monitor.h"

#include "runtime/monitor/csv_monitor.h"
#include "runtime/monitor/tensorboard_writer.h"

namespace ds::runtime {

MonitorSet::MonitorSet(const DsConfig& cfg, int rank) {
  if (rank != 0) return;
  if (cfg.tensorboard.enabled)
    sinks_.push_back(std::make_unique<TensorBoardMonitor>(cfg.tensorboard));
  if (cfg.csvMonitor.enabled) sinks_.push_back(std::make_unique<CsvMonitor>(cfg.csvMonitor));
}

void MonitorSet::write(const std::vector<MonitorEvent>& events) {
  for (auto& s : sinks_) s->write(events);
}

void MonitorSet::flush() {
  for (auto& s : sinks_) s->flush();
}

std::vector<std::string> MonitorSet::sinkLocations() const {
  std::vector<std::string> out;
  for (const auto& s : sinks_) out.push_back(s->where());
  return out;
}

std::vector<MonitorEvent> trainEvents(int64_t samples, double loss, double lr, double lossScale,
                                      double gradNorm) {
  return {{"Train/Samples/train_loss", loss, samples},
          {"Train/Samples/lr", lr, samples},
          {"Train/Samples/loss_scale", lossScale, samples},
          {"Train/Samples/grad_norm", gradNorm, samples}};
}

std::vector<MonitorEvent> timingEvents(int64_t samples, double fwdMs, double bwdMs, double commMs,
                                       double optimMs) {
  return {{"Train/Samples/elapsed_time_ms_forward", fwdMs, samples},
          {"Train/Samples/elapsed_time_ms_backward", bwdMs, samples},
          {"Train/Samples/elapsed_time_ms_backward_allreduce", commMs, samples},
          {"Train/Samples/elapsed_time_ms_step", optimMs, samples}};
}

}  // namespace ds::runtime
