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

int actTag(int micro) { return 2 * micro; }
int gradTag(int micro) { return 2 * micro + 1; }
// forwardOnly's activations: above every step tag for m < 16383 and within MPI's smallest
// guaranteed MPI_TAG_UB (32767).
constexpr int kEvalTag = 32766;

}  // namespace

std::vector<size_t> stageParams(const std::vector<zero::ParamInfo>& params, StageBlocks blocks) {
  std::vector<size_t> out;
  for (size_t i = 0; i < params.size(); ++i) {
    for (int blk : params[i].blocks) {
      if (blk >= blocks.first && blk < blocks.last) {
        out.push_back(i);
        break;
      }
    }
  }
  return out;
}

PipelineStage::PipelineStage(const ModelConfig& cfg, comm::ProcessGroup* pipe,
                             PipelineStageOptions opts)
    : cfg_(cfg), pipe_(pipe), opts_(opts) {
  if (opts_.stages > 1 && (pipe_ == nullptr || pipe_->size() != opts_.stages))
    throw InternalError(fmt::format("pipeline stage {}: the pipeline group has {} ranks, not {}",
                                    opts_.stage, pipe_ ? pipe_->size() : 0, opts_.stages));
  oneFOneB(opts_.stage, opts_.stages, opts_.microBatches);  // refuses m < P
  const int slots = std::min(opts_.stages - opts_.stage, opts_.microBatches);
  for (int i = 0; i < slots; ++i) slots_.push_back(std::make_unique<Gpt2Model>(cfg_));
  const auto micro = static_cast<size_t>(opts_.microBatches);
  actOut_.resize(micro);
  gradOut_.resize(micro);
  actIn_.resize(micro);
  gradIn_.resize(micro);
}

PipelineStepResult PipelineStage::step(const std::function<const Batch&(int)>& batch,
                                       float lossScale, zero::ParamTable& table,
                                       zero::BlockHooks& hooks) {
  const auto start = Clock::now();
  PipelineStepResult res;
  std::vector<comm::WorkPtr> sends;
  const int prev = opts_.stage - 1, next = opts_.stage + 1;
  const auto slotCount = static_cast<int>(slots_.size());
  auto receive = [&](std::vector<float>& buf, int peer, int tag, const char* what, int micro) {
    const auto waitStart = Clock::now();
    try {
      pipe_->recv(comm::view(buf.data(), buf.size()), peer, tag)->wait();
    } catch (const Error& e) {
      throw Error(
          fmt::format("pipeline stage {}: receiving the {} of micro-batch {} from stage "
                      "{}: {}",
                      opts_.stage, what, micro, peer, e.what()));
    }
    res.idleMs += msSince(waitStart);
  };
  for (const PipeOp& op : oneFOneB(opts_.stage, opts_.stages, opts_.microBatches)) {
    const Batch& mb = batch(op.micro);
    const size_t width = static_cast<size_t>(mb.B) * mb.T * cfg_.nEmbd;
    Gpt2Model& model = *slots_[op.micro % slotCount];
    const auto micro = static_cast<size_t>(op.micro);
    if (op.kind == PipeOp::kForward) {
      const float* input = nullptr;
      if (!first()) {
        actIn_[micro].resize(width);
        receive(actIn_[micro], prev, actTag(op.micro), "activations", op.micro);
        input = actIn_[micro].data();
      }
      const float loss =
          model.forwardBlocks(opts_.blocks.first, opts_.blocks.last, mb.inputs.data(),
                              mb.targets.data(), mb.B, mb.T, input, table, hooks);
      if (last()) {
        res.lossSum += loss;
      } else {
        const float* out = model.blocksOutput();
        actOut_[micro].assign(out, out + width);
        sends.push_back(
            pipe_->send(comm::view(actOut_[micro].data(), width), next, actTag(op.micro)));
      }
    } else {
      const float* dOut = nullptr;
      if (!last()) {
        gradIn_[micro].resize(width);
        receive(gradIn_[micro], next, gradTag(op.micro), "activation gradient", op.micro);
        dOut = gradIn_[micro].data();
      }
      model.backwardBlocks(lossScale, dOut, table, hooks);
      if (!first()) {
        const float* grad = model.inputGrad();
        gradOut_[micro].assign(grad, grad + width);
        sends.push_back(
            pipe_->send(comm::view(gradOut_[micro].data(), width), prev, gradTag(op.micro)));
      }
    }
  }
  for (auto& work : sends) work->wait();
  res.stepMs = msSince(start);
  return res;
}

double PipelineStage::forwardOnly(const Batch& mb, zero::ParamTable& table,
                                  zero::BlockHooks& hooks) {
  const size_t width = static_cast<size_t>(mb.B) * mb.T * cfg_.nEmbd;
  Gpt2Model& model = *slots_.front();
  const float* input = nullptr;
  if (!first()) {
    actIn_.front().resize(width);
    try {
      pipe_->recv(comm::view(actIn_.front().data(), width), opts_.stage - 1, kEvalTag)->wait();
    } catch (const Error& e) {
      throw Error(
          fmt::format("pipeline stage {}: receiving the evaluation activations from stage {}: {}",
                      opts_.stage, opts_.stage - 1, e.what()));
    }
    input = actIn_.front().data();
  }
  const float loss = model.forwardBlocks(opts_.blocks.first, opts_.blocks.last, mb.inputs.data(),
                                         mb.targets.data(), mb.B, mb.T, input, table, hooks);
  if (last()) return loss;
  const float* out = model.blocksOutput();
  actOut_.front().assign(out, out + width);
  pipe_->send(comm::view(actOut_.front().data(), width), opts_.stage + 1, kEvalTag)->wait();
  return 0;
}

}  // namespace ds::runtime
