// Internal to gemv: one ISA's kernel computes out[n, o] for every row n < N and the output columns
// o in [o0, o1) (o0 a multiple of 4), weights T = float or uint16_t (bf16 bits). Not for callers
// outside runtime/tensor; the AVX kernels carry target attributes and run only after the CPU check.
// gemvAvx512Bf16 reads its input permuted: every full 32-column chunk of each row as [16 even
// columns | 16 odd columns], the last C % 32 columns in order (permuteEvenOdd32 writes that).
#pragma once

#include <cstdint>

namespace ds::runtime::detail {

struct GemvArgs {
  float* out;
  const float* inp;
  const float* bias;  // may be null
  int N, C, OC;
};

// gemvAvx512Bf16Dot's operands: the input rounded to bf16 bits, row n at inp + n * ldx, columns
// [C, ldx) zero (ldx a multiple of 32).
struct GemvDotArgs {
  float* out;
  const uint16_t* inp;
  const float* bias;  // may be null
  int N, C, OC, ldx;
};

void permuteEvenOdd32(float* dst, const float* src, int N, int C);

void gemvScalarF32(const GemvArgs& a, const float* w, int o0, int o1);
void gemvScalarBf16(const GemvArgs& a, const uint16_t* w, int o0, int o1);
void gemvAvx2F32(const GemvArgs& a, const float* w, int o0, int o1);
void gemvAvx2Bf16(const GemvArgs& a, const uint16_t* w, int o0, int o1);
void gemvAvx512F32(const GemvArgs& a, const float* w, int o0, int o1);
void gemvAvx512Bf16(const GemvArgs& a, const uint16_t* w, int o0, int o1);
void gemvAvx512Bf16Dot(const GemvDotArgs& args, const uint16_t* wgt, int o0, int o1);

}  // namespace ds::runtime::detail
