// Tensor-parallel inference (Megatron's split, docs/inference.md): with T ranks each holds the
// q/k/v rows of heads [rank*H/T, (rank+1)*H/T) and the same fc rows (column-parallel), the matching
// input columns of attproj and fcproj (row-parallel, one allreduce each per block), and wte rows
// [rank*V/T, (rank+1)*V/T) (vocabulary-parallel embedding: one allreduce of the looked-up rows;
// head: the logit slices all-gathered so the sampler sees the whole distribution).
// shardModelWeights slices a whole model's flat parameters (Gpt2Model order) to one rank's.
#pragma once

#include <cstddef>
#include <vector>

#include "runtime/inference/inference_model.h"
#include "runtime/model/model.h"

namespace ds::comm {
class ProcessGroup;
}

namespace ds::runtime {

// ConfigError naming the numbers when nHead, nEmbd (hence 4*nEmbd) or vocabSize do not divide by
// shard.size, or the rank is outside [0, size).
void checkTensorParallel(const ModelConfig& cfg, const TpShard& shard);

// flat: every parameter of cfg's GPT-2, whole. Returns this rank's slices, parameter after
// parameter, and their element counts in sizes.
std::vector<float> shardModelWeights(const ModelConfig& cfg, const std::vector<float>& flat,
                                     const TpShard& shard, std::vector<size_t>& sizes);

// Sum buf over group (no-op for a null group); the wait's timeout names what was being reduced.
void tpAllreduce(comm::ProcessGroup* group, float* buf, size_t count, const char* what);
// out[size * count] = every rank's in[count], rank after rank.
void tpAllgather(comm::ProcessGroup* group, const float* in, float* out, size_t count);

}  // namespace ds::runtime
