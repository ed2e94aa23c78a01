// Token + position embedding (llm.c's encoder): out[b,t,:] = wte[tokens[b,t]] + wpe[t].
// Backward ACCUMULATES into dwte and dwpe; tokens must already be range-checked by the caller.
// Deterministic: each thread owns a channel range and adds rows in (b, t) order.
#pragma once

#include <cstdint>

namespace ds::runtime {

void encoderForward(float* out, const int32_t* tokens, const float* wte, const float* wpe, int B,
                    int T, int C);
void encoderBackward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens, int B,
                     int T, int C);
// encoderBackward split in two: the rows [first, first + rows) of dwte only (dwteRows holds
// those rows), and dwpe only. Each element gets the same additions in the same order as in
// encoderBackward, so the same bits.
void encoderBackwardRows(float* dwteRows, int64_t first, int64_t rows, const float* dout,
                         const int32_t* tokens, int B, int T, int C);
void encoderBackwardPositions(float* dwpe, const float* dout, int B, int T, int C);

}  // namespace ds::runtime
