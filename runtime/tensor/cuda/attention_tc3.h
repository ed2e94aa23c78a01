// The third tensor-core causal attention backward (bf16 or fp16 storage, head size 64): tc2's block
// shape with each streamed query tile taken in two 32-query halves, so that half the score
// fragments are live and the kernel fits 3 blocks per SM. Not the forward (tc3 reuses tc2's,
// attention_tc2.h) nor the dispatch (attention_kernels.cu). Invariant: attentionTc2Backward's
// contract exactly (dqkv's K, V columns += dK, dV; dq fp32 8-byte aligned += dQ by atomics).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace ds::runtime::cuda {

// As attentionTc2Backward: dsum [B, NH, T] is D = rowsum(dO * O), lse the forward's aux. The
// 16-bit words are bf16, or fp16 with fp16 set (the fp16 mma; the only fp16 tensor-core backward).
void attentionTc3Backward(uint16_t* dqkv, float* dq, const uint16_t* dout, const uint16_t* qkv,
                          const float* lse, const float* dsum, int B, int T, int C, int NH,
                          cudaStream_t stream, bool fp16 = false);

}  // namespace ds::runtime::cuda
