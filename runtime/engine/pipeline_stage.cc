// 1F1B execution of one pipeline stage (see pipeline_stage.h).
#include "runtime/engine/pipeline_stage.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "core/error.h"

namespace ds::runtime {

namespace {

using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Tags name the receiving virtual stage and the micro-batch: 2 * (micro * V + vs) (+1 for the
// activation gradient), below kEvalTag for 2 * m * V < kEvalTag - V (checked at construction).
int actTag(int micro, int virtualStages, int receiver) {
  return 2 * (micro * virtualStages + receiver);
}
int gradTag(int micro, int virtualStages, int receiver) {
  return 2 * (micro * virtualStages + receiver) + 1;
}
// forwardOnly's activations, one tag per receiving virtual stage counting down from the top of
// MPI's smallest guaranteed MPI_TAG_UB (32767).
constexpr int kEvalTag = 32766;

}  // namespace

std::vector<size_t> stageParams(const std::vector<zero::ParamInfo>& params,
                                const std::vector<StageBlocks>& chunks) {
  std::vector<size_t> out;
  for (size_t i = 0; i < params.size(); ++i) {
    const bool held = std::any_of(params[i].blocks.begin(), params[i].blocks.end(), [&](int blk) {
      return std::any_of(chunks.begin(), chunks.end(), [blk](const StageBlocks& chunk) {
        return blk >= chunk.first && blk < chunk.last;
      });
    });
    if (held) out.push_back(i);
  }
  return out;
}

PipelineStage::PipelineStage(const ModelConfig& cfg, comm::ProcessGroup* pipe,
                             PipelineStageOptions opts)
    : cfg_(cfg), pipe_(pipe), opts_(std::move(opts)) {
  if (opts_.stages > 1 && (pipe_ == nullptr || pipe_->size() != opts_.stages))
    throw InternalError(fmt::format("pipeline stage {}: the pipeline group has {} ranks, not {}",
                                    opts_.stage, pipe_ ? pipe_->size() : 0, opts_.stages));
  if (opts_.chunks.empty())
    throw InternalError(fmt::format("pipeline stage {}: no blocks", opts_.stage));
  // Refuses m < P (and for the interleaved schedule an m that P does not divide).
  stageSchedule(opts_.stage, opts_.stages, chunks(), opts_.microBatches);
  if (2 * opts_.microBatches * virtualStages() >= kEvalTag - virtualStages())
    throw ConfigError(fmt::format(
        "pipeline: gradient_accumulation_steps {} x {} virtual stages needs message tags beyond "
        "MPI's guaranteed {}; give fewer micro-batches per step",
        opts_.microBatches, virtualStages(), kEvalTag));
  const auto slots = static_cast<size_t>(opts_.microBatches) * static_cast<size_t>(chunks());
  inFlight_.assign(slots, nullptr);
  actOut_.resize(slots);
  gradOut_.resize(slots);
  actIn_.resize(slots);
  gradIn_.resize(slots);
}

Gpt2Model* PipelineStage::takeModel() {
  if (free_.empty()) {
    pool_.push_back(opts_.tensor.enabled() ? std::make_unique<Gpt2Model>(cfg_, opts_.tensor)
                                           : std::make_unique<Gpt2Model>(cfg_));
    free_.push_back(pool_.back().get());
  }
  Gpt2Model* model = free_.back();
  free_.pop_back();
  return model;
}

PipelineStepResult PipelineStage::step(const std::function<const Batch&(int)>& batch,
                                       float lossScale, zero::ParamTable& table,
                                       zero::BlockHooks& hooks) {
  const auto start = Clock::now();
  PipelineStepResult res;
  std::vector<comm::WorkPtr> sends;
  const int total = virtualStages();
  const auto schedule = stageSchedule(opts_.stage, opts_.stages, chunks(), opts_.microBatches);
  auto slotOf = [this](const PipeOp& op) {
    return static_cast<size_t>(op.micro) * static_cast<size_t>(chunks()) +
           static_cast<size_t>(op.chunk);
  };
  // Every receive of the step is posted first, in schedule order. The comm layer completes the
  // waits of one group in submission order, and a send completes once its receiver has posted
  // the receive: posted late (when the schedule reaches it), a receive the peer's earlier send
  // needs could sit behind a wait on that peer, which the interleaved schedule turns into a
  // deadlock. Posted up front, every send lands at once and the waits below come in the order
  // they were posted.
  std::vector<comm::WorkPtr> received(schedule.size());
  for (size_t index = 0; index < schedule.size(); ++index) {
    const PipeOp& op = schedule[index];
    const Batch& mb = batch(op.micro);
    const size_t width = static_cast<size_t>(mb.B) * mb.T * cfg_.nEmbd;
    const int self = virtualStage(op.chunk);
    const size_t slot = slotOf(op);
    if (op.kind == PipeOp::kForward && self > 0) {
      actIn_[slot].resize(width);
      received[index] = pipe_->recv(comm::view(actIn_[slot].data(), width), rankOf(self - 1),
                                    actTag(op.micro, total, self));
    } else if (op.kind == PipeOp::kBackward && self < total - 1) {
      gradIn_[slot].resize(width);
      received[index] = pipe_->recv(comm::view(gradIn_[slot].data(), width), rankOf(self + 1),
                                    gradTag(op.micro, total, self));
    }
  }
  auto receive = [&](size_t index, int peer, const char* what, const PipeOp& op) {
    const auto waitStart = Clock::now();
    try {
      received[index]->wait();
    } catch (const Error& e) {
      throw Error(fmt::format(
          "pipeline stage {}: receiving the {} of micro-batch {} (chunk {}) from stage {}: {}",
          opts_.stage, what, op.micro, op.chunk, peer, e.what()));
    }
    res.idleMs += msSince(waitStart);
  };
  for (size_t index = 0; index < schedule.size(); ++index) {
    const PipeOp& op = schedule[index];
    const Batch& mb = batch(op.micro);
    const size_t width = static_cast<size_t>(mb.B) * mb.T * cfg_.nEmbd;
    const size_t slot = slotOf(op);
    const StageBlocks blocks = opts_.chunks[static_cast<size_t>(op.chunk)];
    const int self = virtualStage(op.chunk);
    if (op.kind == PipeOp::kForward) {
      Gpt2Model& model = *(inFlight_[slot] = takeModel());
      const float* input = nullptr;
      if (self > 0) {
        receive(index, rankOf(self - 1), "activations", op);
        input = actIn_[slot].data();
      }
      const float loss = model.forwardBlocks(blocks.first, blocks.last, mb.inputs.data(),
                                             mb.targets.data(), mb.B, mb.T, input, table, hooks);
      if (self == total - 1) {
        res.lossSum += loss;
      } else {
        const float* out = model.blocksOutput();
        actOut_[slot].assign(out, out + width);
        sends.push_back(pipe_->send(comm::view(actOut_[slot].data(), width), rankOf(self + 1),
                                    actTag(op.micro, total, self + 1)));
      }
    } else {
      Gpt2Model* model = inFlight_[slot];
      if (model == nullptr)
        throw InternalError(
            fmt::format("pipeline stage {}: backward of micro-batch {} chunk {} "
                        "before its forward",
                        opts_.stage, op.micro, op.chunk));
      const float* dOut = nullptr;
      if (self < total - 1) {
        receive(index, rankOf(self + 1), "activation gradient", op);
        dOut = gradIn_[slot].data();
      }
      model->backwardBlocks(lossScale, dOut, table, hooks);
      if (self > 0) {
        const float* grad = model->inputGrad();
        gradOut_[slot].assign(grad, grad + width);
        sends.push_back(pipe_->send(comm::view(gradOut_[slot].data(), width), rankOf(self - 1),
                                    gradTag(op.micro, total, self - 1)));
      }
      inFlight_[slot] = nullptr;
      free_.push_back(model);
    }
  }
  for (auto& work : sends) work->wait();
  res.stepMs = msSince(start);
  return res;
}

double PipelineStage::forwardOnly(const Batch& mb, zero::ParamTable& table,
                                  zero::BlockHooks& hooks) {
  const size_t width = static_cast<size_t>(mb.B) * mb.T * cfg_.nEmbd;
  const int total = virtualStages();
  Gpt2Model& model = pool_.empty() ? *takeModel() : *pool_.front();
  std::vector<float>& in = actIn_.front();
  std::vector<float>& out = actOut_.front();
  double loss = 0;
  for (int chunk = 0; chunk < chunks(); ++chunk) {
    const StageBlocks blocks = opts_.chunks[static_cast<size_t>(chunk)];
    const int self = virtualStage(chunk);
    const float* input = nullptr;
    if (self > 0) {
      in.resize(width);
      try {
        pipe_->recv(comm::view(in.data(), width), rankOf(self - 1), kEvalTag - self)->wait();
      } catch (const Error& e) {
        throw Error(fmt::format(
            "pipeline stage {}: receiving the evaluation activations (chunk {}) from stage {}: {}",
            opts_.stage, chunk, rankOf(self - 1), e.what()));
      }
      input = in.data();
    }
    const float value = model.forwardBlocks(blocks.first, blocks.last, mb.inputs.data(),
                                            mb.targets.data(), mb.B, mb.T, input, table, hooks);
    if (self == total - 1) {
      loss = value;
      continue;
    }
    const float* result = model.blocksOutput();
    out.assign(result, result + width);
    pipe_->send(comm::view(out.data(), width), rankOf(self + 1), kEvalTag - (self + 1))->wait();
  }
  return loss;
}

}  // namespace ds::runtime
