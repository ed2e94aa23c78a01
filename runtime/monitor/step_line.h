// The rank-0 step line (DESIGN §4.11): one line per logged step with loss, lr, loss scale, grad
// norm, throughput and the step-time split. Formatting only; the engine decides when to print.
#pragma once

#include <cstdint>
#include <string>

namespace ds::runtime {

struct StepMetrics {
  int64_t step = 0;        // 1-based optimizer step just finished
  int64_t totalSteps = 0;  // 0: unknown
  double loss = 0;         // mean train loss over the step's micro-batches (all ranks)
  double lr = 0;
  double lossScale = 1;
  double gradNorm = 0;
  bool skipped = false;     // overflow: the update was skipped
  double tokensPerSec = 0;  // global (all ranks)
  double stepsPerSec = 0;   // optimizer steps per second since this run started (0: unknown)
  double etaSec = -1;       // seconds until totalSteps at stepsPerSec (< 0: unknown)
  double stepMs = 0;        // wall time of the step
  double fwdMs = 0, bwdMs = 0, commMs = 0, optimMs = 0;
  bool pipelined = false;  // 1F1B interleaves forward and backward: fwdMs holds both
};

// "step    12/200 | loss 3.1416 | lr 1.00e-03 | scale 65536 | gnorm 0.532 | 12.3k tok/s |
//  2.10 steps/s | ETA 1m30s | 45.1 ms (fwd 10.0 bwd 20.0 comm 5.0 optim 8.0)"
// (+ " | SKIPPED (overflow)"); steps/s and ETA only when known. A pipelined step reads
// "(fwd+bwd 30.0 comm 5.0 optim 8.0)": its stage's forward and backward interleave.
std::string formatStepLine(const StepMetrics& m);

// "eval step 100 | val loss 1.2345 | floor 1.2083 (+0.0262)" (floor < 0: omitted).
std::string formatEvalLine(int64_t step, double valLoss, double entropyFloor);

}  // namespace ds::runtime
