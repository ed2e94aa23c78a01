// Causal multi-head self-attention on llm.c's layout: qkv[B, T, 3C] holds q, k, v side by side,
// head h at columns h*hs..(h+1)*hs; out[B, T, C]; att[B, NH, T, T] saves the softmax
// probabilities (zero above the diagonal) for backward. All products are sgemm calls per
// (batch, head) and block of 32 query rows, against the keys up to the block's last row only
// (the masked upper triangle is not computed); the softmax runs on OpenMP. Backward ACCUMULATES
// into dqkv and needs a T*T scratch. Not flash attention: memory is O(T^2) per head.
#pragma once

namespace ds::runtime {

void attentionForward(float* out, float* att, const float* qkv, int B, int T, int C, int NH);
void attentionBackward(float* dqkv, float* scratchTT, const float* dout, const float* qkv,
                       const float* att, int B, int T, int C, int NH);

}  // namespace ds::runtime
