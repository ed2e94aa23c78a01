// InferenceModel: a GPT-2's weights held for generation (fp32, or bf16 with the small tensors
// widened), loaded from a dsrt checkpoint folder (any ZeRO stage and world size, via
// readGpt2Weights) or an llm.c gpt2_*.bin (ours from `dsrt export-checkpoint --format llmc`, or
// llm.c's own). Not a trainer: no gradients, no ZeRO. With a TpShard of T > 1 ranks it holds
// only this rank's Megatron shard (tensor_parallel.h): qkv/fc rows of its heads and MLP columns,
// attproj/fcproj input columns, wte rows [rank*Vl, (rank+1)*Vl) with Vl = V/T rounded up (the last
// block may reach wte's padding rows); vectors and wpe stay whole.
#pragma once

#include <string>
#include <vector>

#include "core/dtype.h"
#include "runtime/model/model.h"

namespace ds::runtime {

// Which tensor-parallel shard a process holds: rank in [0, size).
struct TpShard {
  int rank = 0, size = 1;
};

class InferenceModel {
 public:
  // cfg: kind gpt2 (validated by makeModel); flat: every parameter in Gpt2Model's order (fp32).
  // dtype kF32 keeps flat; kBF16 rounds every weight to bf16 and keeps the matrices as bf16.
  // shard.size > 1: flat is still the whole model; only this rank's slices are kept. ConfigError
  // naming the numbers when heads, width or vocabulary do not divide by shard.size.
  InferenceModel(const ModelConfig& cfg, std::vector<float> flat, DType dtype,
                 const TpShard& shard = {});
  // slices: only this rank's, as shardRanges (tensor_parallel.h) lists them, sizes its
  // per-parameter element counts (what loadInferenceModel reads, so a rank never holds the whole
  // model).
  static InferenceModel fromSlices(const ModelConfig& cfg, std::vector<float> slices,
                                   const std::vector<size_t>& sizes, DType dtype,
                                   const TpShard& shard);

  const ModelConfig& config() const { return cfg_; }
  DType dtype() const { return dtype_; }
  int vocab() const { return cfg_.vocabSize; }
  const TpShard& shard() const { return shard_; }
  // wte rows held (f32(0)/b16(0)) when tensor-parallel: vocab / T rounded up (tpVocabRows).
  int localVocab() const { return (cfg_.vocabSize + shard_.size - 1) / shard_.size; }
  int localEmbd() const { return cfg_.nEmbd / shard_.size; }  // this rank's heads' width
  // Parameter i (Gpt2Model order) as fp32: always valid for vectors and wpe; for matrices
  // (wte and the linear weights) only in fp32 mode (null in bf16 mode).
  const float* f32(int i) const;
  // Parameter i as bf16 (bf16 mode only; null otherwise).
  const bf16* b16(int i) const;
  int layerParam(int kind, int l) const { return 2 + kind * cfg_.nLayer + l; }
  size_t weightBytes() const;  // bytes the weights occupy as held
  // Every parameter byte this rank holds: weightBytes plus, in bf16 mode, the fp32 copies of the
  // vectors and wpe. With T ranks: 1/T of the split tensors plus the replicated ones
  // (tensor_parallel.h lists which).
  size_t heldBytes() const;

 private:
  InferenceModel(const ModelConfig& cfg, DType dtype, const TpShard& shard);  // checks only
  void hold(std::vector<float> flat, const std::vector<size_t>& sizes);

  ModelConfig cfg_;
  DType dtype_;
  TpShard shard_;
  std::vector<size_t> offsets_;
  std::vector<bool> matrix_;  // held as bf16 in bf16 mode
  std::vector<float> flat_;   // fp32 mode: all; bf16 mode: the non-matrix tensors only (rounded)
  std::vector<size_t> smallOffsets_;  // bf16 mode: parameter i's offset into flat_ (non-matrix)
  std::vector<bf16> flat16_;          // bf16 mode: all (matrices read from here)
};

// What `dsrt generate` loads. path: a checkpoint root (holding `latest`) or a tag folder's parent
// with `tag`, or an llm.c .bin file. nHead/vocab as ExportShape (0: from the checkpoint's plan).
struct LoadOptions {
  std::string tag;
  int nHead = 0, vocabSize = 0;
  DType dtype = DType::kF32;
  TpShard shard;  // tensor-parallel: keep only this rank's slices
};
// ConfigError naming the path when it does not exist or is neither form.
// Reads only this rank's slices of the checkpoint (their byte ranges; the whole model for one
// rank); valuesRead: how many parameter values were read.
InferenceModel loadInferenceModel(const std::string& path, const LoadOptions& opts,
                                  std::string* description = nullptr, size_t* valuesRead = nullptr);

}  // namespace ds::runtime
