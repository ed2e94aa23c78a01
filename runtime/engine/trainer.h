// Trainer: one rank's training run of a Plan. Builds the model, the ZeroEngine (stage, buckets,
// offload from the plan), this rank's data loader, the LR schedule, the loss scaler and the
// monitors; runs the step loop (gradient accumulation, scaled loss, step, overflow skip), the
// periodic eval, checkpoints (save every N steps and at the end; resume continues the same
// trajectory) and writes the step line (rank 0) and the run summary. Not the bootstrap (the
// caller brings the ProcessGroup, nullptr = one rank) and not thread-safe: one training thread.
// Invariant: every rank of the group constructs it with the same plan and calls the same methods
// in the same order (they are collective).
#pragma once

#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/config/plan.h"
#include "runtime/data/corpora.h"
#include "runtime/data/data_loader.h"
#include "runtime/engine/device_mirror.h"
#include "runtime/engine/fault_injection.h"
#include "runtime/engine/fp16_hooks.h"
#include "runtime/engine/run_summary.h"
#include "runtime/engine/timed_hooks.h"
#include "runtime/model/model.h"
#include "runtime/monitor/monitor.h"
#include "runtime/optim/loss_scaler.h"
#include "runtime/optim/lr_schedule.h"
#include "zero/async_file.h"
#include "zero/training_engine.h"

namespace ds::comm {
class ProcessGroup;
}

namespace ds::runtime {

class PipelineRun;
class TensorRun;

struct TrainerOptions {
  std::FILE* out = stdout;  // step / eval lines (rank 0); nullptr: silent
  std::string summaryPath;  // run summary JSON written by rank 0 at the end ("" = none)
  // Resume before training: "" none; "latest" (or any tag) under plan.train.checkpointDir.
  std::string resume;
  // Rank 0 redraws a progress bar on `out` after every step (dsrt train: when stdout is a
  // terminal). Ordinary lines clear it first.
  bool progressBar = false;
  // Where this rank sits on its host (the rank environment): picks cuda:<localRank> when the
  // plan's train.device allows a GPU (runtime/engine/training_device.h).
  int localRank = 0, localSize = 1;
  // Train on these ops instead of the plan's device (not owned; must outlive the Trainer): the
  // device path (device engine, mirror, op models) over the CPU ops in tests, with no GPU.
  Ops* ops = nullptr;
  // Fault tests only (DS_FAULT_KILL): this rank SIGKILLs itself at the named step or save.
  std::optional<FaultKill> faultKill;
  // Tests only (trainer_pxt_test.cc): a pipeline run skips the tied wte's gradient sum between
  // the first and last stage (PipelineRun::testSkipTiedReduction), so a test can show it matters.
  bool testSkipTiedReduction = false;
};

class Trainer {
 public:
  Trainer(Plan plan, comm::ProcessGroup* group, TrainerOptions opts = {});
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Runs steps until plan.train.steps with the eval and checkpoint cadence, a final checkpoint
  // (when a checkpoint dir is set) and eval; writes the summary. Collective.
  const RunSummary& run();

  // One optimizer step: gas micro-steps of forward/backward, then the ZeRO step. Collective.
  StepRecord trainStep();
  // Mean validation loss over plan.train.evalSteps micro-batches from the start of the
  // validation stream (every rank its slice). Collective. Throws if the plan has no val data.
  double evaluate();
  // Writes <checkpointDir>/<tag> (default tag "global_step<N>") and replaces `latest`.
  std::string saveCheckpoint(const std::string& root, std::string tag = "");
  // Loads a checkpoint (tag "" or "latest": the newest) written at any stage / world size.
  void loadCheckpoint(const std::string& root, const std::string& tag = "");

  int64_t step() const { return step_; }  // optimizer steps done (skipped ones included)
  const Plan& plan() const { return plan_; }
  const RunSummary& summary() const { return summary_; }
  zero::TrainingEngine& engine() { return *eng_; }
  // This rank's memory by kind and place: the engine's, or with a device mirror the mirror's
  // device copies and slots on the device and everything the host engine holds on the host.
  zero::MemoryReport memory() const;
  Model& model() { return *model_; }
  std::vector<float> fullParams();  // fp32 master params, flat (collective)

 private:
  double allreduceMean(double x);  // mean over ranks (identity on one rank)
  void barrier();
  void logLine(const std::string& line);
  void writeSummary();
  void reportMemory();   // rank 0 prints the max-over-ranks startup memory table (collective)
  void drawProgress();   // the progress bar (rank 0, TrainerOptions::progressBar)
  void reportOutputs();  // rank 0: where the checkpoints, monitors and summary went
  // Throws ds::Error "step N: loss is nan (...): training diverged ..." unless loss is finite
  // (fp16 with the dynamic scaler excepted: its minimum scale is the stop there).
  void checkFinite(const char* what, double loss, int64_t step, double lr) const;

  Plan plan_;
  comm::ProcessGroup* group_;
  TrainerOptions opts_;
  int rank_ = 0, world_ = 1;
  std::unique_ptr<Ops> ownedOps_;  // the training device's ops, when the trainer opened them
  Ops* ops_ = nullptr;             // the ops the model runs on; null: host kernels (Gpt2Model)
  // MiCS with the stage-3 vocabulary split: this rank's shard group, which wte is split over
  // (declared before model_, which refers to it).
  std::unique_ptr<comm::ProcessGroup> vocabGroup_;
  std::unique_ptr<Model> model_;
  // Swap-file traffic of this process before the engine was built (the summary's nvme figures
  // are this trainer's share); declared before eng_ so it is read before the engine writes.
  zero::SwapIoTotals swapIoAtStart_ = zero::swapIoTotals();
  std::unique_ptr<zero::TrainingEngine> eng_;  // DeviceEngine, or the host ZeroEngine
  std::unique_ptr<DeviceMirror> mirror_;       // device compute: params up, grads back per block
  std::unique_ptr<TimedHooks> hooks_;
  std::unique_ptr<Fp16Hooks> fp16Hooks_;  // fp16 mode: around hooks_ (fp16_hooks.h)
  // parallel.pipeline > 1: this rank's stage, its subgroups and reductions (pipeline_run.h).
  std::unique_ptr<PipelineRun> pipe_;
  // parallel.tensor > 1: this rank's tensor and data subgroups, the canonical <-> shard maps and
  // the norm scope (tensor_run.h); model_ is then this rank's shard of the GPT.
  std::unique_ptr<TensorRun> tensor_;
  std::unique_ptr<Model> canonicalModel_;  // tensor > 1: the whole model (no weights): init
  // The pipelined trainStep's forward/backward and step (trainer_pipeline.cc); fills rec's
  // timings and returns the step's mean loss (the same on every rank).
  double pipelineStep(StepRecord& rec, zero::StepResult& res, double lr, double scale);
  zero::BlockHooks& modelHooks();
  zero::BlockHooks& plainHooks() {
    if (mirror_) return *mirror_;
    if (fp16Hooks_) return *fp16Hooks_;
    return *hooks_;
  }
  // The parameters the model reads: the device copies, or the engine's own.
  zero::ParamTable& modelTable();
  Corpora corpora_;
  std::unique_ptr<DataLoader> loader_, valLoader_;
  std::unique_ptr<LrSchedule> schedule_;
  std::unique_ptr<LossScaler> scaler_;
  std::unique_ptr<MonitorSet> monitors_;
  Batch batch_;
  int64_t evalBatches_ = 0;  // global validation batches per eval (train_semantics.h)
  int64_t step_ = 0;
  int64_t samples_ = 0;                             // global training samples consumed
  std::chrono::steady_clock::time_point runStart_;  // start of this process's first step
  int64_t stepsThisRun_ = 0;                        // steps done by this process (not resumed)
  double stepsPerSec_ = 0;                          // stepsThisRun_ / seconds since runStart_
  bool barShown_ = false;                           // the progress bar is on the last line
  struct Timers {  // wall_clock_breakdown: sums since the last printed breakdown line
    int64_t steps = 0;
    double fwdMs = 0, bwdMs = 0, commMs = 0, optimMs = 0;
  } timers_;
  RunSummary summary_;
};

}  // namespace ds::runtime
