// Tensor-parallel inference (Megatron's split, docs/inference.md): with T ranks each holds the
// q/k/v rows of heads [rank*H/T, (rank+1)*H/T) and the same fc rows (column-parallel), the matching
// input columns of attproj and fcproj (row-parallel, one allreduce each per block), and wte rows
// [rank*V/T, (rank+1)*V/T) (vocabulary-parallel embedding: one allreduce of the looked-up rows;
// head: the logit slices all-gathered so the sampler sees the whole distribution).
// shardRanges names a rank's slices as ranges of the whole model's flat parameters (Gpt2Model
// order), so a loader reads only those bytes; shardModelWeights applies them to a whole model.
// Replicated on every rank: wpe, the layernorms, the attproj and fcproj biases (added by rank 0
// only) and ln_f; split 1/T: wte (tpVocabRows rows each; padding rows only as far as the last
// block reaches), qkv, fc, attproj and fcproj.
#pragma once

#include <cstddef>
#include <vector>

#include "runtime/inference/inference_model.h"
#include "runtime/model/model.h"

namespace ds::comm {
class ProcessGroup;
}

namespace ds::runtime {

// ConfigError naming the numbers when nHead or nEmbd (hence 4*nEmbd) do not divide by shard.size,
// when shard.size blocks of tpVocabRows rows do not fit wte's paddedVocab rows, or the rank is
// outside [0, size).
void checkTensorParallel(const ModelConfig& cfg, const TpShard& shard);
// wte rows (and logits) per rank: vocabSize / ranks rounded up, so a vocabulary that does not
// divide (GPT-2's 50257) still splits: the last rank's block reaches into the padding rows, whose
// logits are dropped when the blocks are gathered. vocabSize for one rank.
int tpVocabRows(const ModelConfig& cfg, int ranks);

// A run of flat elements [offset, offset + count).
struct WeightRange {
  size_t offset = 0, count = 0;
};

// This rank's slices, parameter after parameter, as ranges of the whole flat parameters (in the
// order they are held; adjacent ranges merged); sizes: each parameter's held element count.
// shard.size 1: the whole model (wte with its padding rows).
std::vector<WeightRange> shardRanges(const ModelConfig& cfg, const TpShard& shard,
                                     std::vector<size_t>& sizes);
// Elements of cfg's GPT-2 as Gpt2Model holds them (wte padded).
size_t flatSize(const ModelConfig& cfg);

// flat: every parameter of cfg's GPT-2, whole. Returns this rank's slices, parameter after
// parameter, and their element counts in sizes.
std::vector<float> shardModelWeights(const ModelConfig& cfg, const std::vector<float>& flat,
                                     const TpShard& shard, std::vector<size_t>& sizes);

// Sum buf over group (no-op for a null group); the wait's timeout names what was being reduced.
void tpAllreduce(comm::ProcessGroup* group, float* buf, size_t count, const char* what);
// out[size * count] = every rank's in[count], rank after rank.
void tpAllgather(comm::ProcessGroup* group, const float* in, float* out, size_t count);

}  // namespace ds::runtime
