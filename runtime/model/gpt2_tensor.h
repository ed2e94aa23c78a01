// The tensor-parallel comm points of the training GPT-2 (issue 17 item 3): Megatron's split of
// Gpt2Model over T ranks of a tensor group (the split map itself is tensor_shard.h).
// Forward: the vocabulary-parallel embedding (rows not held masked, one allreduce, then wpe),
// one allreduce after the row-parallel attproj and fcproj (the bias added once, after it), the
// LM head's local logits [B*T, V/T] and a vocabulary-parallel cross-entropy (the row max, the
// sum of exponentials and the target logit reduced over the group; the full logits never exist
// on one rank). Backward: one allreduce of the input gradient of qkv, of fc and of the head (the
// "f" operator), so the residual-stream gradient, hence every replicated parameter's gradient
// (LayerNorms, wpe, row-parallel biases), is the same on every tensor rank.
// Invariant: every rank of the group makes the same calls in the same order (they are
// collective); size 1 (or a null group) is the single-rank model, no communication.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ds::comm {
class ProcessGroup;
}

namespace ds::runtime {

struct TensorParallel {
  comm::ProcessGroup* group = nullptr;  // the tensor group (not owned); null when size is 1
  int rank = 0, size = 1;
  // Test hook (tests/runtime/model/gpt2_tensor_test.cc): skip the allreduce of fc's input
  // gradient, so a test can show its check fails without it. Never set outside tests.
  bool testSkipFcInputGradAllreduce = false;
  bool enabled() const { return size > 1; }
};

// Sum buf[count] over the tensor group (no-op at size 1). The wait's timeout and errors name
// `what` and the rank.
void tensorAllreduce(const TensorParallel& tp, float* buf, size_t count, const char* what);

// out[B*T, C] = wte rows of the tokens this rank holds (rows [vocabBegin, vocabBegin + rows)),
// summed over the group, plus wpe.
void tensorEmbeddingForward(const TensorParallel& tp, float* out, const int32_t* tokens,
                            const float* wteLocal, const float* wpe, int B, int T, int C,
                            int64_t vocabBegin, int64_t rows);
// ACCUMULATES the local wte rows' and wpe's gradients from dout (the same on every rank).
void tensorEmbeddingBackward(float* dwteLocal, float* dwpe, const float* dout,
                             const int32_t* tokens, int B, int T, int C, int64_t vocabBegin,
                             int64_t rows);

// logitsToProbs [N, cols]: this rank's logits of vocabulary [vocabBegin, vocabBegin + cols),
// replaced by their softmax probabilities over the WHOLE vocabulary. Returns the summed loss
// over rows with target >= 0 (the same on every rank) and their count in *valid.
double tensorCrossEntropyForward(const TensorParallel& tp, float* logitsToProbs,
                                 const int32_t* targets, int N, int cols, int64_t vocabBegin,
                                 int* valid);
// dlogits [N, cols] = scale * (probs - onehot(target)) on this rank's vocabulary columns.
void tensorCrossEntropyBackward(float* dlogits, const float* probs, const int32_t* targets, int N,
                                int cols, int64_t vocabBegin, float scale);

}  // namespace ds::runtime
