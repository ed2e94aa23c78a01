// Trainer checkpoints (see trainer.h): every rank writes its optimizer shard, rank 0 the full fp32
// model and the client state (global step, optimizer steps, samples consumed, loss scaler, the
// plan identity a resume must match), then runtime/checkpoint publishes `latest` after a barrier.
// Loading refuses another model/data configuration and rebuilds the same state at any ZeRO stage
// and world size, so training continues on the same trajectory.
#include <cinttypes>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/log.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/engine/pipeline_run.h"
#include "runtime/engine/tensor_run.h"
#include "runtime/engine/trainer.h"

namespace ds::runtime {

namespace {

// What must not change across a resume: the model's shape and the training data (corpus and the
// order drawn from train.seed). Everything else (world size, ZeRO stage, offload, batch layout,
// steps, cadence, optimizer hyper-parameters, precision, the validation data) may legitimately
// change. Ordered key/value pairs; stored in client_state.plan_identity so a mismatch names the
// fields.
std::vector<std::pair<std::string, std::string>> planIdentity(const Plan& p) {
  const auto& m = p.model;
  const auto& d = p.data;
  std::vector<std::pair<std::string, std::string>> v = {{"model.kind", m.kind}};
  if (m.kind == "mlp") {
    v.push_back({"model.mlp.sizes", fmt::format("{}", fmt::join(m.sizes, ","))});
    v.push_back({"model.mlp.seq_len", std::to_string(m.seqLen)});
  } else {
    v.push_back({"model.gpt.n_layer", std::to_string(m.nLayer)});
    v.push_back({"model.gpt.n_head", std::to_string(m.nHead)});
    v.push_back({"model.gpt.n_embd", std::to_string(m.nEmbd)});
    v.push_back({"model.gpt.seq_len", std::to_string(m.seqLen)});
    v.push_back({"model.gpt.vocab_size", std::to_string(m.vocabSize)});
    v.push_back({"model.gpt.padded_vocab_size",
                 std::to_string(m.paddedVocab ? m.paddedVocab : m.vocabSize)});
  }
  if (d.kind == "shards") {
    v.push_back({"data.shards", d.shards});
  } else {
    v.push_back({"data.synthetic.seed", std::to_string(d.syntheticSeed)});
    v.push_back({"data.synthetic.tokens", std::to_string(d.syntheticTokens)});
    v.push_back({"data.synthetic.branching", std::to_string(d.syntheticBranching)});
  }
  v.push_back({"train.seed", std::to_string(p.train.seed)});
  return v;
}

// FNV-1a over the identity pairs.
std::string planHash(const Plan& p) {
  std::string s;
  for (const auto& [k, val] : planIdentity(p)) s += k + "=" + val + "\n";
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return fmt::format("{:016x}", h);
}

// Refuses a checkpoint written for another model/data configuration (info.planHash empty: a
// checkpoint written without one, accepted).
void checkPlanHash(const Plan& p, const CheckpointInfo& info, const nlohmann::json& cs) {
  const std::string mine = planHash(p);
  if (info.planHash.empty() || info.planHash == mine) return;
  std::vector<std::string> diffs;
  if (cs.contains("plan_identity") && cs["plan_identity"].is_object()) {
    const auto& saved = cs["plan_identity"];
    for (const auto& [k, val] : planIdentity(p)) {
      std::string was =
          saved.contains(k) && saved[k].is_string() ? saved[k].get<std::string>() : "(absent)";
      if (was != val) diffs.push_back(fmt::format("{}: checkpoint {}, plan {}", k, was, val));
    }
  }
  const std::string detail =
      diffs.empty() ? std::string() : fmt::format(" ({})", fmt::join(diffs, "; "));
  throw ConfigError(fmt::format(
      "checkpoint {}: written for plan hash {} but this plan hashes to {}: its model or data "
      "configuration differs{}. Resume with the plan that wrote it (world size, ZeRO stage, "
      "offload, batch layout, steps and cadence may change), or start a fresh run without "
      "--resume or with another train.checkpoint.dir",
      info.dir, info.planHash, mine, detail));
}

}  // namespace

std::string Trainer::saveCheckpoint(const std::string& root, std::string tag) {
  if (tag.empty()) tag = fmt::format("global_step{}", step_);
  std::vector<float> full = fullParams();  // collective at stages 1-3
  // In the whole model's flat space at any layout (a pipeline stage's ranges translated), so a
  // checkpoint loads at any pipeline size, ZeRO stage and world size.
  // Tensor parallel: the canonical (unsplit) layout, written whole by rank 0 (tensor_run.h).
  // P x T: the stage's part of the local model, then canonical over data, pipeline and tensor.
  auto shard = pipe_ ? pipe_->modelShard(eng_->optimizerShard()) : eng_->optimizerShard();
  if (tensor_) shard = tensor_->canonicalShard(shard, pipe_ ? pipe_->pipelineGroup() : nullptr);
  SaveRequest req;
  req.dir = root;
  req.tag = tag;
  req.rank = rank_;
  req.worldSize = world_;
  req.zeroStage = summary_.zeroStage;
  req.step = step_;
  req.dtype = plan_.deepspeed.bf16 ? "bf16" : "fp32";
  req.planHash = planHash(plan_);
  req.params = canonicalModel_ ? &canonicalModel_->params() : &model_->params();
  req.fullParams = rank_ == 0 ? full.data() : nullptr;
  for (const auto& t : shard) req.optimizer.push_back({t.name, t.offset, t.size, t.data.data()});
  if (rank_ == 0) {
    auto s = scaler_->state();
    nlohmann::json cs = {{"global_step", step_},
                         {"optimizer_steps", eng_->stepCount()},
                         {"global_samples", samples_},
                         {"train_batch_size", plan_.deepspeed.trainBatchSize},
                         {"parallel_pipeline", plan_.parallel.pipeline},  // informational
                         {"parallel_tensor", plan_.parallel.tensor},
                         {"plan_identity", nlohmann::json::object()},
                         {"loss_scaler",
                          {{"cur_scale", s.curScale},
                           {"cur_iter", s.curIter},
                           {"last_overflow_iter", s.lastOverflowIter},
                           {"cur_hysteresis", s.curHysteresis}}}};
    for (const auto& [k, v] : planIdentity(plan_)) cs["plan_identity"][k] = v;
    req.clientState = cs.dump();
  }
  // The first call comes once this rank's files are written, before `latest` moves.
  req.barrier = [this, first = true]() mutable {
    if (first) maybeFaultKill(opts_.faultKill, FaultPoint::kSave, rank_, step_);
    first = false;
    barrier();
  };
  runtime::saveCheckpoint(req);
  logLine(fmt::format("checkpoint {}/{} saved (step {})", root, tag, step_));
  return tag;
}

void Trainer::loadCheckpoint(const std::string& root, const std::string& tag) {
  auto reader = CheckpointReader::open(root, tag == "latest" ? "" : tag);
  const CheckpointInfo& info = reader->info();
  nlohmann::json cs;
  try {
    cs = nlohmann::json::parse(info.clientState.empty() ? "{}" : info.clientState);
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(
        fmt::format("checkpoint {}: client state is not JSON: {}", info.dir, e.what()));
  }
  checkPlanHash(plan_, info, cs);
  const auto& params = canonicalModel_ ? canonicalModel_->params() : model_->params();
  reader->checkParams(params);
  zero::TrainingEngine::ParamSource source = [&reader](size_t offset, size_t size, float* out) {
    reader->readModelRange(offset, size, out);  // this rank's ranges only (stage 3: its shard)
  };
  if (tensor_) source = tensor_->localSource(std::move(source));
  eng_->setParamsFrom(pipe_ ? pipe_->localSource(std::move(source)) : std::move(source));
  if (mirror_) mirror_->invalidate();
  const int64_t optSteps = cs.value("optimizer_steps", info.step);
  // Canonical -> this tensor rank's local model -> this stage's engine, as far as the layout has.
  PipelineRun::RangeReader ranges = reader->rangeReader();
  if (tensor_) ranges = tensor_->localRangeReader(std::move(ranges));
  if (pipe_) ranges = pipe_->localRangeReader(std::move(ranges));
  eng_->loadOptimizerState(ranges, optSteps);

  step_ = cs.value("global_step", info.step);
  samples_ = cs.value("global_samples", step_ * plan_.deepspeed.trainBatchSize);
  const int dataRanks = plan_.dataParallel();  // every pipeline stage reads the same batches
  const int64_t perMicro = plan_.deepspeed.microBatchPerGpu * dataRanks;
  if (samples_ % perMicro != 0)
    throw ConfigError(fmt::format(
        "checkpoint {}: {} samples consumed is not a whole number of global micro-batches of "
        "{} (micro batch {} x {} data-parallel ranks); resume with a batch layout that divides "
        "it",
        info.dir, samples_, perMicro, plan_.deepspeed.microBatchPerGpu, dataRanks));
  loader_->seek(uint64_t(samples_ / perMicro));
  if (cs.contains("loss_scaler")) {
    const auto& ls = cs["loss_scaler"];
    LossScaler::State s;
    s.curScale = ls.value("cur_scale", 1.0);
    s.curIter = ls.value("cur_iter", int64_t(0));
    s.lastOverflowIter = ls.value("last_overflow_iter", int64_t(-1));
    s.curHysteresis = ls.value("cur_hysteresis", 1);
    if (scaler_->dynamic()) scaler_->setState(s);
  }
  summary_.firstStep = step_;
  const int savedPipeline = cs.value("parallel_pipeline", 1);
  const int savedTensor = cs.value("parallel_tensor", 1);
  logLine(fmt::format(
      "resumed from {} (step {}, saved by {} rank(s){} at ZeRO stage {}, {})", info.dir, step_,
      info.worldSize,
      (savedPipeline > 1 ? fmt::format(" in {} pipeline stages", savedPipeline) : std::string()) +
          (savedTensor > 1 ? fmt::format(" over {} tensor ranks", savedTensor) : std::string()),
      info.zeroStage, info.dtype));
}

}  // namespace ds::runtime
