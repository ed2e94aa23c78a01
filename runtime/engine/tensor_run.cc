// The Trainer's tensor-parallel parts (see tensor_run.h).
#include "runtime/engine/tensor_run.h"

#include <algorithm>
#include <mutex>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"
#include "runtime/engine/axis_group.h"
#include "runtime/model/tensor_shard.h"
#include "zero/dp_comm.h"

namespace ds::runtime {

namespace {

std::vector<size_t> offsetsOf(const std::vector<zero::ParamInfo>& params) {
  std::vector<size_t> out;
  size_t offset = 0;
  for (const auto& info : params) {
    out.push_back(offset);
    offset += info.numel;
  }
  out.push_back(offset);
  return out;
}

}  // namespace

void checkTensorTrainer(const Plan& plan, bool onDevice) {
  const int tensor = plan.parallel.tensor;
  if (tensor <= 1) return;
  if (plan.model.kind != "gpt2")
    throw ConfigError(fmt::format(
        "{}: parallel.tensor = {} splits a GPT (model.gpt); model {} runs data parallelism only",
        plan.source, tensor, plan.model.kind));
  if (onDevice)
    throw ConfigError(fmt::format(
        "{}: parallel.tensor = {} runs on the host engine only so far; set train.device: cpu",
        plan.source, tensor));
  if (plan.deepspeed.zero.stage > 1)
    throw ConfigError(fmt::format(
        "{}: zero_optimization.stage {} with parallel.tensor = {}: tensor parallelism runs ZeRO "
        "stages 0 and 1 (the data-parallel engine over each rank's shards; stages 2 and 3 are not "
        "verified with it yet); give stage 0 or 1",
        plan.source, plan.deepspeed.zero.stage, tensor));
  if (plan.deepspeed.optimizer.compressed())
    throw ConfigError(fmt::format(
        "{}: optimizer.type {} with parallel.tensor = {}: the compressed (1-bit) optimizers keep "
        "per-rank error feedback that the tensor group's global norm does not cover; use Adam, "
        "AdamW or SGD, or parallel.tensor 1",
        plan.source, plan.deepspeed.optimizer.type, tensor));
}

TensorRun::TensorRun(const Plan& plan, const std::vector<zero::ParamInfo>& canonical,
                     comm::ProcessGroup* world)
    : grid_(world ? world->size() : 1, plan.parallel),
      coord_(grid_.coordOf(world ? world->rank() : 0)),
      canonical_(canonical),
      canonicalOffset_(offsetsOf(canonical)) {
  if (world == nullptr)
    throw InternalError("TensorRun: parallel.tensor > 1 needs the job's process group");
  grid_.checkModel({0, plan.model.nHead, plan.model.nEmbd,
                    plan.model.paddedVocab > 0 ? plan.model.paddedVocab : plan.model.vocabSize});
  // Every rank creates every group of every axis in the same order (collective over world).
  tensor_ = axisGroup(world, grid_.allGroups("tensor"));
  data_ = axisGroup(world, grid_.allGroups("data"));
}

TensorRun::~TensorRun() = default;

TensorParallel TensorRun::modelTensor() const {
  TensorParallel tp;
  tp.group = tensor_.get();
  tp.rank = coord_.tensor;
  tp.size = grid_.tensor();
  return tp;
}

void TensorRun::setLocalParams(const std::vector<zero::ParamInfo>& local) {
  if (local.size() != canonical_.size())
    throw InternalError(fmt::format("TensorRun: {} local parameters for {} canonical ones",
                                    local.size(), canonical_.size()));
  for (size_t i = 0; i < local.size(); ++i) {
    const TensorShard shard =
        gpt2TensorShard(canonical_[i].name, canonical_[i].shape, grid_.tensor());
    if (local[i].name != canonical_[i].name || size_t(shard.localNumel()) != local[i].numel)
      throw InternalError(
          fmt::format("TensorRun: local parameter {} ({} elements) is not the "
                      "shard of {} ({} of {})",
                      local[i].name, local[i].numel, canonical_[i].name, shard.localNumel(),
                      canonical_[i].numel));
  }
  local_ = local;
  localOffset_ = offsetsOf(local);
}

bool TensorRun::replicated(size_t param) const {
  return gpt2TensorShard(canonical_.at(param).name, canonical_[param].shape, grid_.tensor()).kind ==
         ShardKind::kReplicated;
}

void TensorRun::bind(zero::ZeroEngine& engine) {
  zero::ZeroEngine::NormScope scope;
  if (coord_.tensor != 0) {  // tensor rank 0 counts the replicated parameters
    for (size_t i = 0; i < local_.size(); ++i) {
      if (!replicated(i)) continue;
      const size_t begin = localOffset_[i], end = localOffset_[i + 1];
      if (!scope.skipRanges.empty() && scope.skipRanges.back().second == begin)
        scope.skipRanges.back().second = end;
      else scope.skipRanges.emplace_back(begin, end);
    }
  }
  scope.acrossStages = [group = tensor_.get()](double sumSquares) {
    const auto all = zero::DpComm(group).allgatherDouble(sumSquares);
    double total = 0;
    for (double part : all) total += part;  // rank order: the same sum on every tensor rank
    return total;
  };
  engine.setNormScope(std::move(scope));
}

zero::TrainingEngine::ParamSource TensorRun::localSource(
    zero::TrainingEngine::ParamSource canonical) const {
  RangeReader named = localRangeReader(
      [canonical = std::move(canonical)](size_t offset, size_t size, const std::string&,
                                         float* out) { canonical(offset, size, out); });
  return [named = std::move(named)](size_t offset, size_t size, float* out) {
    named(offset, size, "", out);
  };
}

TensorRun::RangeReader TensorRun::localRangeReader(RangeReader canonical) const {
  // One parameter's shard cached: the engine asks in pieces, a large parameter (wte) would
  // otherwise be read and scattered once per piece.
  struct Cache {
    std::mutex mutex;
    long param = -1;
    std::string name;
    std::vector<float> whole, shard;
  };
  auto cache = std::make_shared<Cache>();
  return [this, canonical = std::move(canonical), cache](size_t offset, size_t size,
                                                         const std::string& name, float* out) {
    std::lock_guard<std::mutex> lock(cache->mutex);
    const size_t end = offset + size;
    for (size_t i = 0; i < local_.size() && offset < end; ++i) {
      if (offset >= localOffset_[i + 1]) continue;
      if (cache->param != long(i) || cache->name != name) {
        cache->whole.resize(canonical_[i].numel);
        canonical(canonicalOffset_[i], canonical_[i].numel, name, cache->whole.data());
        cache->name = name;
        cache->shard.resize(local_[i].numel);
        gpt2TensorShard(canonical_[i].name, canonical_[i].shape, grid_.tensor())
            .scatter(cache->whole.data(), cache->shard.data(), coord_.tensor);
        cache->param = long(i);
      }
      const size_t within = offset - localOffset_[i];
      const size_t count = std::min(end, localOffset_[i + 1]) - offset;
      std::copy_n(cache->shard.begin() + std::ptrdiff_t(within), count, out);
      out += count;
      offset += count;
    }
    if (offset < end)
      throw InternalError(
          fmt::format("TensorRun: local range ends past its {} elements", localOffset_.back()));
  };
}

std::vector<float> TensorRun::toCanonical(const std::vector<float>& allShards) const {
  const size_t localNumel = localOffset_.back();
  std::vector<float> out(canonicalOffset_.back());
  for (int rank = 0; rank < grid_.tensor(); ++rank) {
    const float* shards = allShards.data() + size_t(rank) * localNumel;
    for (size_t i = 0; i < local_.size(); ++i)
      gpt2TensorShard(canonical_[i].name, canonical_[i].shape, grid_.tensor())
          .gather(shards + localOffset_[i], out.data() + canonicalOffset_[i], rank);
  }
  return out;
}

std::vector<float> TensorRun::fullParams(zero::TrainingEngine& engine) const {
  std::vector<float> local(localOffset_.back());
  engine.getParams(local.data());
  return gatherCanonical(std::move(local));
}

std::vector<float> TensorRun::gatherCanonical(std::vector<float> local) const {
  const size_t localNumel = localOffset_.back();
  if (local.size() != localNumel)
    throw InternalError(fmt::format("TensorRun: {} local parameters gathered, the shard has {}",
                                    local.size(), localNumel));
  std::vector<float> all(localNumel * size_t(grid_.tensor()));
  const std::vector<size_t> counts(size_t(grid_.tensor()), localNumel);
  try {
    tensor_
        ->allgather(comm::view(local.data(), localNumel), comm::view(all.data(), all.size()),
                    counts)
        ->wait();
  } catch (const Error& e) {
    throw CommError(
        fmt::format("tensor parallel: allgather of the shards ({} floats) on tensor "
                    "rank {} of {}: {}",
                    localNumel, coord_.tensor, grid_.tensor(), e.what()));
  }
  return toCanonical(all);
}

std::vector<zero::TrainingEngine::ShardTensor> TensorRun::canonicalShard(
    const std::vector<zero::TrainingEngine::ShardTensor>& local, comm::ProcessGroup* stages) const {
  const size_t localNumel = localOffset_.back();
  std::vector<std::string> names;
  for (const auto& tensor : local)
    if (std::find(names.begin(), names.end(), tensor.name) == names.end())
      names.push_back(tensor.name);
  const float nobody = float(grid_.data());
  std::vector<zero::TrainingEngine::ShardTensor> out;
  for (const std::string& name : names) {  // the engines' states, in the same order everywhere
    std::vector<float> values(localNumel, 0.0f), owner(localNumel, nobody);
    for (const auto& tensor : local) {
      if (tensor.name != name) continue;
      std::copy(tensor.data.begin(), tensor.data.end(),
                values.begin() + std::ptrdiff_t(tensor.offset));
      std::fill_n(owner.begin() + std::ptrdiff_t(tensor.offset), tensor.size, float(coord_.data));
    }
    if (data_) {  // each element from the lowest data rank holding it: the sum adds zeros only
      data_->allreduce(comm::view(owner.data(), localNumel), comm::ReduceOp::kMin)->wait();
      for (size_t i = 0; i < localNumel; ++i)
        if (owner[i] != float(coord_.data)) values[i] = 0.0f;
      data_->allreduce(comm::view(values.data(), localNumel))->wait();
    }
    if (stages) {  // P x T: each element from the one stage holding it (the others add zeros)
      std::vector<float> held(localNumel, 0.0f);
      for (size_t i = 0; i < localNumel; ++i) {
        if (owner[i] == nobody) values[i] = 0.0f;
        else held[i] = 1.0f;
      }
      stages->allreduce(comm::view(values.data(), localNumel))->wait();
      stages->allreduce(comm::view(held.data(), localNumel))->wait();
      for (size_t i = 0; i < localNumel; ++i) {
        if (held[i] != 1.0f)
          throw InternalError(fmt::format(
              "tensor x pipeline checkpoint: optimizer state {} local element {} held by {} "
              "pipeline stages, not 1",
              name, i, held[i]));
        owner[i] = 0.0f;
      }
    }
    for (size_t i = 0; i < localNumel; ++i)
      if (owner[i] == nobody)
        throw InternalError(fmt::format(
            "tensor parallel checkpoint: optimizer state {} element {} held by no data rank", name,
            i));
    std::vector<float> all(localNumel * size_t(grid_.tensor()));
    const std::vector<size_t> counts(size_t(grid_.tensor()), localNumel);
    tensor_
        ->allgather(comm::view(values.data(), localNumel), comm::view(all.data(), all.size()),
                    counts)
        ->wait();
    if (coord_.data != 0 || coord_.tensor != 0 || coord_.pipeline != 0) continue;
    zero::TrainingEngine::ShardTensor whole;
    whole.name = name;
    whole.offset = 0;
    whole.data = toCanonical(all);
    whole.size = whole.data.size();
    out.push_back(std::move(whole));
  }
  return out;
}

std::string TensorRun::describe(const ModelConfig& model) const {
  const int ranks = grid_.tensor();
  const int heads = model.nHead / ranks, mlp = 4 * model.nEmbd / ranks;
  const int padded = model.paddedVocab > 0 ? model.paddedVocab : model.vocabSize;
  const int rows = padded / ranks;
  std::string out = grid_.describe();
  out += fmt::format("tensor shards (Megatron split over {} ranks):", ranks);
  for (int rank = 0; rank < grid_.world(); ++rank) {
    const GridCoord coord = grid_.coordOf(rank);
    const int tensor = coord.tensor;
    out += fmt::format(
        "\n  rank {}: data {} tensor {}: heads [{}, {}) of {}, MLP columns [{}, {}) of {}, "
        "vocabulary rows [{}, {}) of {}",
        rank, coord.data, tensor, tensor * heads, (tensor + 1) * heads, model.nHead, tensor * mlp,
        (tensor + 1) * mlp, 4 * model.nEmbd, tensor * rows, (tensor + 1) * rows, padded);
  }
  return out;
}

}  // namespace ds::runtime
