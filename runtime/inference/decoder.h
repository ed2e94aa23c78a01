// Decoder: GPT-2 forward for generation over an InferenceModel and a KvCache. One call runs N
// token rows; row i is token tokens[i] of the sequence in slot slots[i] at that slot's next
// position. Rows of one slot must be consecutive and in order, so a prompt's prefill (N rows of
// one slot) and a batched decode step (one row per slot) are the same call. Each row's keys and
// values are appended to the cache, then each row attends over its slot's positions up to its own.
// The math is the training model's (runtime/tensor: layernorm, matmul, GELU, residual; the same
// 1/sqrt(hs) scaled, max-subtracted softmax); only the attention over the cache is written here.
// Tensor-parallel (model.shard().size > 1, DecoderOptions::group): this rank's heads and MLP
// columns only, two allreduces per block plus one for the embedding, the logits all-gathered
// (tensor_parallel.h); every rank of the group must make the same calls. Not thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/inference/inference_model.h"
#include "runtime/inference/kv_cache.h"

namespace ds::comm {
class ProcessGroup;
}

namespace ds::runtime {

// Where a linear product leaves the weight-streaming gemv (runtime/tensor/gemv.h) for a gemm: at
// most this many rows use gemv (weights read once from memory, each 4-row group reused from L1 by
// every row), more use sgemm (fp32) or the bf16 linear path. 0 turns gemv off (A/B measurements).
// fp32: 16 rows (with its accumulators in registers the 16-row gemv was 2.3x as fast as sgemm on a
// 768 x 100000 matrix, one core; 4 and 8 rows 3.1x and 2.5x; /tmp microbenchmark, 2026-11-27).
// bf16 default (-1): by the bf16 linear path (gemvRowsBf16Auto). Native bf16 linears (inputs
// rounded to bf16) run the AVX512-BF16 dot-product gemv at 1 row where the CPU has it (it beat the
// AMX gemm there; AMX won from 4 rows on), else the gemm; the widen path (inputs fp32) runs the
// widening gemv up to 16 rows.
struct DecoderOptions {
  int gemvMaxRows = 16;
  int gemvMaxRowsBf16 = -1;
  comm::ProcessGroup* group = nullptr;  // the tensor-parallel ranks (needed when sharded)
};

// The bf16 gemv row limit DecoderOptions' -1 stands for, from the process's bf16 linear path.
int gemvRowsBf16Auto();

class Decoder {
 public:
  Decoder(const InferenceModel& model, int slots, const DecoderOptions& opts = {});
  // logits: [count of logitRows, vocab] for the rows i with logitRows[i] true (all rows when
  // logitRows is empty), in row order. Throws ConfigError when a slot would pass the context or a
  // token is outside the vocabulary.
  void forward(const int* slots, const int32_t* tokens, int n, const std::vector<bool>& logitRows,
               float* logits);
  void reset(int slot) { cache_.setLength(slot, 0); }
  int length(int slot) const { return cache_.length(slot); }
  const KvCache& cache() const { return cache_; }

 private:
  void ensure(int n);
  void linear(float* out, const float* in, int kw, int kb, int layer, int n, int cin, int cout,
              bool rowParallel = false);
  void product(float* out, const float* in, const float* w32, const bf16* w16, const float* bias,
               int n, int cin, int cout);
  void attention(int layer, const int* slots, const int* pos, int n);

  const InferenceModel& m_;
  DecoderOptions opts_;
  KvCache cache_;
  std::vector<int> pos_;
  std::vector<float> x_, ln_, mean_, rstd_, qkv_, atty_, tmp_, res2_, fch_, fchGelu_, widen_,
      scores_, localLogits_, gathered_;
};

}  // namespace ds::runtime
