// Step and eval line formatting; see step_line.h.
#include "runtime/monitor/step_line.h"

#include <fmt/format.h>

#include "runtime/monitor/progress_bar.h"

namespace ds::runtime {
namespace {

std::string rate(double tokensPerSec) {
  if (tokensPerSec >= 1e6) return fmt::format("{:.2f}M", tokensPerSec / 1e6);
  if (tokensPerSec >= 1e3) return fmt::format("{:.1f}k", tokensPerSec / 1e3);
  return fmt::format("{:.0f}", tokensPerSec);
}

}  // namespace

std::string formatStepLine(const StepMetrics& m) {
  std::string steps =
      m.totalSteps > 0 ? fmt::format("{}/{}", m.step, m.totalSteps) : fmt::format("{}", m.step);
  std::string line =
      fmt::format("step {:>9} | loss {:.4f} | lr {:.2e} | scale {:g} | gnorm {:.3f} | {} tok/s | ",
                  steps, m.loss, m.lr, m.lossScale, m.gradNorm, rate(m.tokensPerSec));
  if (m.stepsPerSec > 0) line += fmt::format("{:.2f} steps/s | ", m.stepsPerSec);
  if (m.etaSec >= 0 && m.totalSteps > 0) line += "ETA " + formatDuration(m.etaSec) + " | ";
  if (m.pipelined) {
    line += fmt::format("{:.1f} ms (fwd+bwd {:.1f} comm {:.1f} optim {:.1f})", m.stepMs,
                        m.fwdMs + m.bwdMs, m.commMs, m.optimMs);
  } else {
    line += fmt::format("{:.1f} ms (fwd {:.1f} bwd {:.1f} comm {:.1f} optim {:.1f})", m.stepMs,
                        m.fwdMs, m.bwdMs, m.commMs, m.optimMs);
  }
  if (m.skipped) line += " | SKIPPED (overflow)";
  return line;
}

std::string formatEvalLine(int64_t step, double valLoss, double entropyFloor) {
  std::string line = fmt::format("eval step {} | val loss {:.4f}", step, valLoss);
  if (entropyFloor >= 0)
    line += fmt::format(" | floor {:.4f} ({:+.4f})", entropyFloor, valLoss - entropyFloor);
  return line;
}

}  // namespace ds::runtime
