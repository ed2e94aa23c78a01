// Tensor-core (mma.sync bf16) causal attention, the first version: bf16 storage, head size 64
// (attention_tc_kernels.cu); since attention_tc2.h replaced it, the fallback DS_CUDA_ATTENTION=tc1
// selects. Not the dispatch: attention_kernels.cu picks these, tc2 or the SIMT kernels. Invariant:
// the SIMT kernels' contract (aux = natural-log lse [B, NH, T] of scale*S; backward adds into
// dqkv); bf16 operands, every accumulator fp32.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace ds::runtime::cuda {

inline constexpr int kAttentionTcHeadSize = 64;

// Whether the tensor-core kernels take this call: hs == 64 and the pointers aligned for their
// 16-byte (qkv, dout) and 4-byte (out, dqkv) accesses. bf16 storage is the caller's check.
bool attentionTcSupported(int hs, const void* qkv, const void* out, const void* dout,
                          const void* dqkv);

// out [B, T, C] bf16 and lse [B, NH, T] from qkv [B, T, 3C] bf16 (uint16_t bits); C = 64 * NH.
void attentionTcForward(uint16_t* out, float* lse, const uint16_t* qkv, int B, int T, int C, int NH,
                        cudaStream_t stream);

// dqkv's key and value columns += dK, dV (bf16, read-add-write); dq [B, T, C] fp32 += dQ by
// atomics. dsum [B, NH, T] is D = rowsum(dO * O), lse the forward's aux.
void attentionTcBackward(uint16_t* dqkv, float* dq, const uint16_t* dout, const uint16_t* qkv,
                         const float* lse, const float* dsum, int B, int T, int C, int NH,
                         cudaStream_t stream);

}  // namespace ds::runtime::cuda
