// The Trainer's pipelined step (parallel.pipeline > 1; see trainer.h and pipeline_run.h): one
// 1F1B pass over the step's micro-batches on this rank's stage, the tied gradient sum, then the
// stage engine's step (data-parallel reduction; norm and overflow over the pipeline group), and
// the last stage's loss on every rank.
#include <chrono>

#include "runtime/engine/pipeline_run.h"
#include "runtime/engine/trainer.h"

namespace ds::runtime {

zero::BlockHooks& Trainer::modelHooks() {
  if (pipe_) return pipe_->hooks();
  return plainHooks();
}

zero::ParamTable& Trainer::modelTable() {
  if (pipe_) return pipe_->table();
  return mirror_ ? mirror_->table() : eng_->table();
}

double Trainer::pipelineStep(StepRecord& rec, zero::StepResult& res, double lr, double scale) {
  const int gas = int(plan_.deepspeed.gradientAccumulationSteps);
  // As the unpipelined step: the loss scaled by 1/gas so the accumulated gradient is the mean.
  const PipelineStepResult pass =
      pipe_->forwardBackward(*loader_, float(scale) / float(gas), *eng_);
  const double hookMs = hooks_->take();
  // Forward and backward interleave under 1F1B: fwdMs holds the stage's compute of both, commMs
  // its hooks and its waits for the neighbouring stages (the bubble as this stage sees it).
  rec.fwdMs = pass.stepMs - pass.idleMs - hookMs;
  rec.commMs = pass.idleMs + hookMs;
  res = eng_->step(float(lr), float(scale), float(plan_.deepspeed.gradientClipping));
  return pipe_->lastStageMean(pass.lossSum / gas);
}

}  // namespace ds::runtime
