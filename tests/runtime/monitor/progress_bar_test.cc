// Progress text (issue 16 item 6): durations, the progress bar, and steps/s + ETA in the step line.
#include <catch2/catch.hpp>

#include "runtime/monitor/progress_bar.h"
#include "runtime/monitor/step_line.h"

using namespace ds::runtime;

TEST_CASE("progress: durations read as a person says them", "[unit]") {
  CHECK(formatDuration(0) == "0s");
  CHECK(formatDuration(59.4) == "59s");
  CHECK(formatDuration(245) == "4m05s");
  CHECK(formatDuration(7380) == "2h03m");
  CHECK(formatDuration(3 * 86400 + 4 * 3600 + 59) == "3d04h");
  CHECK(formatDuration(-1) == "?");
  CHECK(formatDuration(1.0 / 0.0) == "?");
}

TEST_CASE("progress: the bar fills with the steps and carries rate and ETA", "[unit]") {
  std::string bar = formatProgressBar(45, 100, 2.1, 12345, 80);
  CHECK(bar.size() == 80);
  CHECK(bar.substr(bar.find(']')) == "]  45/100  45% | 2.10 steps/s | 12.3k tok/s | ETA 26s");
  const size_t cells = bar.find(']') - 1;
  CHECK(bar.substr(1, cells).find_first_not_of('=') == size_t(double(cells) * 0.45));
  CHECK(bar[1 + size_t(double(cells) * 0.45)] == '>');
  std::string full = formatProgressBar(100, 100, 2, 0, 60);
  CHECK(full.size() == 60);
  CHECK(full.substr(1, full.find(']') - 1).find_first_not_of('=') == std::string::npos);
  CHECK(formatProgressBar(0, 10, 0, 0, 40) == "[>" + std::string(26, ' ') + "]  0/10   0%");
  CHECK(formatProgressBar(5, 10, 1, 0, 20).size() > 20);  // never fewer than 10 cells
  CHECK(progressBarRedraw("[=>]") == "\r[=>]\x1b[K");
  CHECK(progressBarClear() == "\r\x1b[K");
}

TEST_CASE("step line: steps/s and ETA when known", "[unit]") {
  StepMetrics m;
  m.step = 12;
  m.totalSteps = 200;
  m.loss = 3.14159;
  m.lr = 1e-3;
  m.tokensPerSec = 12345;
  m.stepMs = 45.1;
  m.stepsPerSec = 2.5;
  m.etaSec = 75.2;
  CHECK(formatStepLine(m) ==
        "step    12/200 | loss 3.1416 | lr 1.00e-03 | scale 1 | gnorm 0.000 | 12.3k tok/s | "
        "2.50 steps/s | ETA 1m15s | 45.1 ms (fwd 0.0 bwd 0.0 comm 0.0 optim 0.0)");
  m.totalSteps = 0;  // unknown end: no ETA
  CHECK(formatStepLine(m).find("ETA") == std::string::npos);
  // A pipelined step's forward and backward interleave: one figure for both, never "bwd 0.0".
  m.fwdMs = 30.0;
  m.commMs = 5.0;
  m.pipelined = true;
  const std::string line = formatStepLine(m);
  CHECK_THAT(line, Catch::EndsWith("45.1 ms (fwd+bwd 30.0 comm 5.0 optim 0.0)"));
  CHECK(line.find("bwd 0.0") == std::string::npos);
}
