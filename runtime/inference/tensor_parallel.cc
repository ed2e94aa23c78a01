// Tensor-parallel slicing and collectives for inference (see tensor_parallel.h).
#include "runtime/inference/tensor_parallel.h"

#include <algorithm>
#include <cstddef>
#include <string>

#include <fmt/format.h>

#include "comm/process_group.h"
#include "core/error.h"
#include "runtime/model/gpt2_layout.h"

namespace ds::runtime {
namespace {

using namespace gpt2;  // LayerKind

// Appends rows [row0, row0 + rows) of a [*, cols] matrix at src.
void takeRows(std::vector<float>& out, const float* src, size_t row0, size_t rows, size_t cols) {
  out.insert(out.end(), src + row0 * cols, src + (row0 + rows) * cols);
}

// Appends columns [col0, col0 + width) of every row of a [rows, cols] matrix at src.
void takeCols(std::vector<float>& out, const float* src, size_t rows, size_t cols, size_t col0,
              size_t width) {
  for (size_t r = 0; r < rows; ++r)
    out.insert(out.end(), src + r * cols + col0, src + r * cols + col0 + width);
}

}  // namespace

void checkTensorParallel(const ModelConfig& cfg, const TpShard& shard) {
  const int ranks = shard.size;
  if (ranks < 1 || shard.rank < 0 || shard.rank >= ranks)
    throw ConfigError(
        fmt::format("generate: tensor-parallel rank {} outside [0, {})", shard.rank, ranks));
  if (ranks == 1) return;
  auto need = [&](const char* what, int value) {
    if (value % ranks != 0)
      throw ConfigError(fmt::format(
          "generate: tensor-parallel over {} ranks needs {} ({}) divisible by {}; run on a "
          "number of ranks that divides it",
          ranks, what, value, ranks));
  };
  need("n_head", cfg.nHead);
  need("n_embd", cfg.nEmbd);
  need("vocab_size", cfg.vocabSize);
}

std::vector<float> shardModelWeights(const ModelConfig& cfg, const std::vector<float>& flat,
                                     const TpShard& shard, std::vector<size_t>& sizes) {
  checkTensorParallel(cfg, shard);
  const size_t C = static_cast<size_t>(cfg.nEmbd), L = static_cast<size_t>(cfg.nLayer);
  const size_t T = static_cast<size_t>(shard.size), r = static_cast<size_t>(shard.rank);
  const size_t Cl = C / T, Vl = static_cast<size_t>(cfg.vocabSize) / T;
  const size_t Vp = static_cast<size_t>(cfg.paddedVocab), maxT = static_cast<size_t>(cfg.seqLen);
  std::vector<float> out;
  sizes.clear();
  const float* src = flat.data();
  auto mark = [&](size_t before) { sizes.push_back(out.size() - before); };
  size_t before = out.size();
  takeRows(out, src, r * Vl, Vl, C);  // wte: this rank's vocabulary rows
  mark(before);
  src += Vp * C;
  before = out.size();
  out.insert(out.end(), src, src + maxT * C);  // wpe whole
  mark(before);
  src += maxT * C;
  // Per-kind whole sizes (Gpt2Model's shapes) and how each kind is cut.
  const size_t whole[kLayerKinds] = {C, C, 3 * C * C, 3 * C, C * C,     C,
                                     C, C, 4 * C * C, 4 * C, 4 * C * C, C};
  for (int kind = 0; kind < kLayerKinds; ++kind) {
    for (size_t l = 0; l < L; ++l) {
      before = out.size();
      switch (kind) {
        case kQkvw:  // q, k, v blocks: this rank's heads' rows of each
          for (size_t part = 0; part < 3; ++part) takeRows(out, src + part * C * C, r * Cl, Cl, C);
          break;
        case kQkvb:
          for (size_t part = 0; part < 3; ++part) takeRows(out, src + part * C, r * Cl, Cl, 1);
          break;
        case kAttprojw: takeCols(out, src, C, C, r * Cl, Cl); break;
        case kFcw: takeRows(out, src, r * 4 * Cl, 4 * Cl, C); break;
        case kFcb: takeRows(out, src, r * 4 * Cl, 4 * Cl, 1); break;
        case kFcprojw: takeCols(out, src, C, 4 * C, r * 4 * Cl, 4 * Cl); break;
        default:  // layernorms and the row-parallel biases (added once, on rank 0)
          out.insert(out.end(), src, src + whole[kind]);
      }
      mark(before);
      src += whole[kind];
    }
  }
  before = out.size();
  out.insert(out.end(), src, src + 2 * C);  // lnf w, b
  sizes.push_back(C);
  sizes.push_back(C);
  src += 2 * C;
  if (src != flat.data() + flat.size())
    throw InternalError(fmt::format("tensor-parallel shard: walked {} of {} weights",
                                    src - flat.data(), flat.size()));
  return out;
}

void tpAllreduce(comm::ProcessGroup* group, float* buf, size_t count, const char* what) {
  if (group == nullptr || group->size() == 1) return;
  try {
    group->allreduce(comm::view(buf, count))->wait();
  } catch (const Error& e) {
    throw CommError(
        fmt::format("generate: tensor-parallel allreduce of {} ({} floats) on rank "
                    "{} of {}: {}",
                    what, count, group->rank(), group->size(), e.what()));
  }
}

void tpAllgather(comm::ProcessGroup* group, const float* in, float* out, size_t count) {
  if (group == nullptr || group->size() == 1) {
    std::copy(in, in + count, out);
    return;
  }
  const std::vector<size_t> counts(static_cast<size_t>(group->size()), count);
  group
      ->allgather(comm::view(const_cast<float*>(in), count), comm::view(out, count * counts.size()),
                  counts)
      ->wait();
}

}  // namespace ds::runtime
