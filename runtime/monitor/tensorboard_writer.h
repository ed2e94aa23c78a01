// TensorBoard event files written without TensorFlow or protobuf: TFRecord framing (uint64
// length, masked CRC-32C of the length, data, masked CRC-32C of the data) around tensorflow.Event
// protos encoded by hand (wall_time=1 double, step=2 int64, file_version=3 string, summary=5 {
// value=1 { tag=1 string, simple_value=2 float } }). The file is
// <output_path>/<job_name>/events.out.tfevents.<unix seconds, 10 digits>.<hostname>.<pid>.0 (as
// torch's SummaryWriter names it), opening with a file_version "brain.Event:2" event.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "runtime/monitor/monitor.h"

namespace ds::runtime {

// Building blocks (exposed for the tests that check them against known bytes).
std::string encodeScalarEvent(double wallTime, int64_t step, const std::string& tag, float value);
std::string encodeFileVersionEvent(double wallTime);  // file_version "brain.Event:2"
std::string tfRecord(const std::string& data);        // one framed record

class TensorBoardMonitor : public Monitor {
 public:
  // Folder <output_path>/<job_name>; DeepSpeed's default output_path "" gives ./<job_name>.
  // Creates the folder and the file (ConfigError naming the path if it cannot).
  explicit TensorBoardMonitor(const MonitorConfig& cfg);
  ~TensorBoardMonitor() override;
  TensorBoardMonitor(const TensorBoardMonitor&) = delete;
  TensorBoardMonitor& operator=(const TensorBoardMonitor&) = delete;

  void write(const std::vector<MonitorEvent>& events) override;
  void flush() override;
  const std::string& path() const { return path_; }
  std::string where() const override { return "tensorboard " + path_; }

 private:
  void append(const std::string& record);
  std::string path_;
  FILE* file_ = nullptr;
};

}  // namespace ds::runtime
