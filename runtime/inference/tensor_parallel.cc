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

// Builds a shard's list of flat ranges, merging a range that starts where the last one ended.
class RangeList {
 public:
  explicit RangeList(std::vector<WeightRange>& out) : out_(out) {}
  void add(size_t offset, size_t count) {
    if (count == 0) return;
    if (!out_.empty() && out_.back().offset + out_.back().count == offset) {
      out_.back().count += count;
    } else {
      out_.push_back({offset, count});
    }
    total_ += count;
  }
  // Rows [row0, row0 + rows) of a [*, cols] matrix at base.
  void rows(size_t base, size_t row0, size_t rows, size_t cols) {
    add(base + row0 * cols, rows * cols);
  }
  // Columns [col0, col0 + width) of every row of a [rows, cols] matrix at base.
  void cols(size_t base, size_t rows, size_t cols, size_t col0, size_t width) {
    for (size_t row = 0; row < rows; ++row) add(base + row * cols + col0, width);
  }
  size_t total() const { return total_; }

 private:
  std::vector<WeightRange>& out_;
  size_t total_ = 0;
};

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
  const int rows = (cfg.vocabSize + ranks - 1) / ranks;  // wte rows per rank
  if (rows * ranks > cfg.paddedVocab)
    throw ConfigError(fmt::format(
        "generate: tensor-parallel over {} ranks splits wte into {} blocks of {} rows (vocab_size "
        "{} rounded up), more than its {} rows (padded_vocab_size); run on a number of ranks that "
        "divides vocab_size or pad wte further",
        ranks, ranks, rows, cfg.vocabSize, cfg.paddedVocab));
}

int tpVocabRows(const ModelConfig& cfg, int ranks) {
  return ranks == 1 ? cfg.vocabSize : (cfg.vocabSize + ranks - 1) / ranks;
}

std::vector<WeightRange> shardRanges(const ModelConfig& cfg, const TpShard& shard,
                                     std::vector<size_t>& sizes) {
  checkTensorParallel(cfg, shard);
  const size_t C = static_cast<size_t>(cfg.nEmbd), L = static_cast<size_t>(cfg.nLayer);
  const size_t T = static_cast<size_t>(shard.size), r = static_cast<size_t>(shard.rank);
  const size_t Cl = C / T, Vl = static_cast<size_t>(tpVocabRows(cfg, shard.size));
  const size_t Vp = static_cast<size_t>(cfg.paddedVocab), maxT = static_cast<size_t>(cfg.seqLen);
  std::vector<WeightRange> ranges;
  RangeList list(ranges);
  sizes.clear();
  size_t src = 0;  // the flat offset of the parameter being cut
  size_t before = 0;
  auto mark = [&] {
    sizes.push_back(list.total() - before);
    before = list.total();
  };
  if (T == 1) {  // whole: every parameter as it is
    list.rows(0, 0, Vp, C);
    mark();
  } else {
    list.rows(0, r * Vl, Vl, C);  // wte: this rank's vocabulary rows (the last may reach padding)
    mark();
  }
  src += Vp * C;
  list.add(src, maxT * C);  // wpe whole
  mark();
  src += maxT * C;
  // Per-kind whole sizes (Gpt2Model's shapes) and how each kind is cut.
  const size_t whole[kLayerKinds] = {C, C, 3 * C * C, 3 * C, C * C,     C,
                                     C, C, 4 * C * C, 4 * C, 4 * C * C, C};
  for (int kind = 0; kind < kLayerKinds; ++kind) {
    for (size_t l = 0; l < L; ++l) {
      if (T == 1) {
        list.add(src, whole[kind]);
        mark();
        src += whole[kind];
        continue;
      }
      switch (kind) {
        case kQkvw:  // q, k, v blocks: this rank's heads' rows of each
          for (size_t part = 0; part < 3; ++part) list.rows(src + part * C * C, r * Cl, Cl, C);
          break;
        case kQkvb:
          for (size_t part = 0; part < 3; ++part) list.rows(src + part * C, r * Cl, Cl, 1);
          break;
        case kAttprojw: list.cols(src, C, C, r * Cl, Cl); break;
        case kFcw: list.rows(src, r * 4 * Cl, 4 * Cl, C); break;
        case kFcb: list.rows(src, r * 4 * Cl, 4 * Cl, 1); break;
        case kFcprojw: list.cols(src, C, 4 * C, r * 4 * Cl, 4 * Cl); break;
        default:  // layernorms and the row-parallel biases (added once, on rank 0)
          list.add(src, whole[kind]);
      }
      mark();
      src += whole[kind];
    }
  }
  list.add(src, C);  // lnf w
  mark();
  list.add(src + C, C);  // lnf b
  mark();
  return ranges;
}

size_t flatSize(const ModelConfig& cfg) {
  const size_t C = static_cast<size_t>(cfg.nEmbd), L = static_cast<size_t>(cfg.nLayer);
  return static_cast<size_t>(cfg.paddedVocab) * C + static_cast<size_t>(cfg.seqLen) * C +
         L * (12 * C * C + 13 * C) + 2 * C;
}

std::vector<float> shardModelWeights(const ModelConfig& cfg, const std::vector<float>& flat,
                                     const TpShard& shard, std::vector<size_t>& sizes) {
  const auto ranges = shardRanges(cfg, shard, sizes);
  if (flat.size() != flatSize(cfg))
    throw InternalError(fmt::format("tensor-parallel shard: {} weights given, the model has {}",
                                    flat.size(), flatSize(cfg)));
  std::vector<float> out;
  for (const WeightRange& range : ranges) {
    const auto first = flat.begin() + static_cast<std::ptrdiff_t>(range.offset);
    out.insert(out.end(), first, first + static_cast<std::ptrdiff_t>(range.count));
  }
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
