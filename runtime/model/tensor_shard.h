// Megatron-style tensor-parallel split of one GPT-2 parameter (issue 17 items 3 and 6): which
// part of the canonical (unsplit, llm.c order) tensor tensor-rank r of T holds, and the copies
// between the canonical tensor and a rank's local shard.
// Why: the split model (step 1), its initialisation (every T gives the single-rank weights) and
// checkpoints in the canonical layout (a T=2 checkpoint loads at T=1 and the reverse) all need
// the same map; keeping it in one place makes them agree by construction.
// Layout (weights are [out, in] row-major, as llm.c's matmul reads them):
//   column-parallel (qkvw/qkvb, fcw/fcb, wte): rows split. qkv has 3 row segments (q, k, v),
//     each split by heads, so rank r holds rows [s*C + r*C/T, s*C + (r+1)*C/T) for s = 0, 1, 2.
//   row-parallel (attprojw, fcprojw): columns (input features) split.
//   replicated (LayerNorms, wpe, biases of row-parallel layers): every rank holds all.
// Invariants: the local shards of ranks 0..T-1 cover each split tensor exactly once;
// scatter(gather(x)) == x; T = 1 is the identity.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ds::runtime {

enum class ShardKind { kReplicated, kRows, kCols };

struct TensorShard {
  ShardKind kind = ShardKind::kReplicated;
  int64_t rows = 1, cols = 1;  // canonical shape (a vector is [n] = rows n, cols 1)
  int segments = 1;            // row segments split separately (3 for qkv: q, k, v)
  int tensor = 1;              // T
  // Throws ds::ConfigError naming `name`, the dimension and T when the split does not divide.
  void check(const std::string& name) const;
  int64_t localRows() const;
  int64_t localCols() const;
  int64_t localNumel() const { return localRows() * localCols(); }
  // canonical [rows, cols] -> the part rank `rank` holds [localRows, localCols].
  void scatter(const float* canonical, float* local, int rank) const;
  // The inverse: write rank `rank`'s part back into canonical (a replicated tensor is copied).
  void gather(const float* local, float* canonical, int rank) const;
};

// The split of a GPT-2 parameter by its Gpt2Model name ("wte", "wpe", "h.3.qkvw", "lnfw", ...)
// and canonical shape. Unknown names are an error (a new parameter must state its split).
TensorShard gpt2TensorShard(const std::string& name, const std::vector<int64_t>& shape, int tensor);

}  // namespace ds::runtime
