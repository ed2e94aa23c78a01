// Startup memory table and end-of-run lines; see run_report.h.
#include "runtime/engine/run_report.h"

#include <filesystem>

#include <fmt/format.h>

#include "comm/process_group.h"

namespace ds::runtime {

namespace {

constexpr const char* kKindNames[4] = {"params", "grads", "optimizer states", "buffers"};

std::string mib(size_t bytes) { return fmt::format("{:.2f}", double(bytes) / double(1 << 20)); }

std::string absolute(const std::string& path) {
  std::error_code ec;
  auto abs = std::filesystem::absolute(path, ec);
  return ec ? path : abs.lexically_normal().string();
}

}  // namespace

zero::MemoryReport largestOverRanks(comm::ProcessGroup* group, const zero::MemoryReport& mine,
                                    size_t* largestTotal) {
  std::vector<float> cells;  // floats: the one dtype every backend reduces
  for (const auto& kind : mine.bytes)
    for (size_t bytes : kind) cells.push_back(float(bytes));
  cells.push_back(float(mine.total()));
  if (group && group->size() > 1)
    group->allreduce(comm::view(cells.data(), cells.size()), comm::ReduceOp::kMax)->wait();
  zero::MemoryReport maxima;
  for (size_t i = 0; i < 12; ++i) maxima.bytes[i / 3][i % 3] = size_t(double(cells[i]));
  *largestTotal = group && group->size() > 1 ? size_t(double(cells[12])) : mine.total();
  if (!group || group->size() <= 1) return mine;
  return maxima;
}

std::string formatMemoryTable(const zero::MemoryReport& maxima, size_t largestTotal, int world,
                              const std::string& device) {
  std::string text = fmt::format(
      "memory per rank at start, MiB ({}; each rank's own figures: DS_LOG_LEVEL=debug):\n",
      world > 1 ? fmt::format("largest over {} ranks", world) : "1 rank");
  text += fmt::format("  {:<17} {:>12} {:>12} {:>12}\n", "", device, "host", "nvme");
  for (int kind = 0; kind < 4; ++kind)
    text +=
        fmt::format("  {:<17} {:>12} {:>12} {:>12}\n", kKindNames[kind], mib(maxima.bytes[kind][0]),
                    mib(maxima.bytes[kind][1]), mib(maxima.bytes[kind][2]));
  text += fmt::format("  {:<17} {:>12}", "total", mib(largestTotal));
  return text;
}

std::vector<std::string> formatOutputLines(const std::string& checkpointDir,
                                           const std::string& checkpointTag,
                                           const std::vector<std::string>& monitors,
                                           const std::string& summaryPath) {
  std::vector<std::string> lines;
  if (checkpointDir.empty())
    lines.emplace_back("checkpoints: none (set train.checkpoint.dir to save them)");
  else if (checkpointTag.empty())
    lines.push_back(
        fmt::format("checkpoints: {} (none written by this run)", absolute(checkpointDir)));
  else
    lines.push_back(
        fmt::format("checkpoints: {} (latest: {})", absolute(checkpointDir), checkpointTag));
  if (monitors.empty()) {
    lines.emplace_back("monitors: none (enable csv_monitor or tensorboard in the ds_config)");
  } else {
    std::string text = "monitors:";
    for (size_t i = 0; i < monitors.size(); ++i) {
      auto space = monitors[i].find(' ');
      text += fmt::format("{} {} {}", i ? ";" : "", monitors[i].substr(0, space),
                          absolute(monitors[i].substr(space + 1)));
    }
    lines.push_back(text + " (plot: scripts/plot_run.py)");
  }
  lines.push_back(summaryPath.empty()
                      ? "summary: none (pass --summary FILE or set train.checkpoint.dir)"
                      : "summary: " + absolute(summaryPath));
  return lines;
}

}  // namespace ds::runtime
