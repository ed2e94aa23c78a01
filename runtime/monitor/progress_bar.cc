// Progress bar and durations; see progress_bar.h.
#include "runtime/monitor/progress_bar.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace ds::runtime {

namespace {

std::string rate(double perSec) {
  if (perSec >= 1e6) return fmt::format("{:.2f}M", perSec / 1e6);
  if (perSec >= 1e3) return fmt::format("{:.1f}k", perSec / 1e3);
  return fmt::format("{:.0f}", perSec);
}

}  // namespace

std::string formatDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  auto secs = static_cast<int64_t>(std::llround(seconds));
  if (secs < 60) return fmt::format("{}s", secs);
  if (secs < 3600) return fmt::format("{}m{:02}s", secs / 60, secs % 60);
  if (secs < 86400) return fmt::format("{}h{:02}m", secs / 3600, (secs % 3600) / 60);
  return fmt::format("{}d{:02}h", secs / 86400, (secs % 86400) / 3600);
}

std::string formatProgressBar(int64_t step, int64_t total, double stepsPerSec, double tokensPerSec,
                              int width) {
  const double frac = total > 0 ? std::clamp(double(step) / double(total), 0.0, 1.0) : 0.0;
  std::string tail =
      fmt::format(" {:>{}}/{} {:>3.0f}%", step, std::to_string(total).size(), total, 100.0 * frac);
  if (stepsPerSec > 0) {
    tail += fmt::format(" | {:.2f} steps/s", stepsPerSec);
    if (tokensPerSec > 0) tail += fmt::format(" | {} tok/s", rate(tokensPerSec));
    tail += " | ETA " + formatDuration(double(total - step) / stepsPerSec);
  }
  const int cells = std::max(10, width - static_cast<int>(tail.size()) - 2);
  const int done = static_cast<int>(std::floor(frac * cells));
  std::string bar(static_cast<size_t>(done), '=');
  if (done < cells) bar += '>';
  bar.resize(static_cast<size_t>(cells), ' ');
  return "[" + bar + "]" + tail;
}

std::string progressBarRedraw(const std::string& bar) { return "\r" + bar + "\x1b[K"; }

std::string progressBarClear() { return "\r\x1b[K"; }

}  // namespace ds::runtime
