// The second tensor-core causal attention (bf16 storage, head size 64; mma.sync, cp.async
// pipelines, ldmatrix fragments): CudaOps' default forward for that case (tc3 reuses it); its
// backward runs with DS_CUDA_ATTENTION=tc2 since attention_tc3.h's replaced it; the first
// (attention_tc.h) is kept behind tc1. Not the dispatch (attention_kernels.cu).
// Invariant: the first's contract exactly: aux = natural-log lse [B, NH, T] of scale*S, bf16
// operands, fp32 accumulators, backward adds into dqkv; the same alignment (attentionTcSupported)
// plus dq 8-byte aligned.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace ds::runtime::cuda {

// out [B, T, C] and lse [B, NH, T] from qkv [B, T, 3C], 16-bit words (uint16_t): bf16, or fp16
// with fp16 set (the fp16 mma); C = 64 * NH.
void attentionTc2Forward(uint16_t* out, float* lse, const uint16_t* qkv, int B, int T, int C,
                         int NH, cudaStream_t stream, bool fp16 = false);

// dqkv's key and value columns += dK, dV (bf16, read-add-write); dq [B, T, C] fp32 += dQ by
// atomics (dq 8-byte aligned). dsum [B, NH, T] is D = rowsum(dO * O), lse the forward's aux.
void attentionTc2Backward(uint16_t* dqkv, float* dq, const uint16_t* dout, const uint16_t* qkv,
                          const float* lse, const float* dsum, int B, int T, int C, int NH,
                          cudaStream_t stream);

}  // namespace ds::runtime::cuda
