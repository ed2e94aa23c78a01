// CSV monitor laid out as DeepSpeed's csvMonitor (deepspeed/monitor/csv_monitor.py): a folder
// <output_path>/<job_name>/, one file per event name with '/' and ' ' replaced by '_' plus
// ".csv", a header row "step,<last path component>" written the first time this monitor writes
// that file, then one "step,value" row per event (appending to existing files).
#pragma once

#include <set>
#include <string>

#include "runtime/monitor/monitor.h"

namespace ds::runtime {

class CsvMonitor : public Monitor {
 public:
  // Folder <output_path>/<job_name>; DeepSpeed's default output_path "" gives ./<job_name>.
  // Creates the folder (ConfigError naming the path if it cannot).
  CsvMonitor(const MonitorConfig& cfg);
  void write(const std::vector<MonitorEvent>& events) override;
  const std::string& logDir() const { return logDir_; }
  std::string where() const override { return "csv_monitor " + logDir_; }

 private:
  std::string logDir_;
  std::set<std::string> started_;
};

}  // namespace ds::runtime
