// bf16 <-> fp32 bulk conversion (see bf16_convert.h): blocks of kBlock elements over OpenMP
// threads; in each, the AVX-512 loop over whole 16-lane vectors where the CPU has AVX-512F, the
// scalar conversion for the rest (and everything on other CPUs). The same bits either way.
#include "runtime/tensor/bf16_convert.h"

#include <cstdint>

namespace ds::runtime {
namespace {

constexpr size_t kParallelMin = 1 << 15;  // below this, threads cost more than they save
constexpr size_t kBlock = 1 << 14;        // a multiple of 16: only the last block has a tail

bool haveAvx512() {
  static const bool have = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") != 0;
  }();
  return have;
}

// [0, n) in blocks: vec(i0, len) converts a block's whole 16-element vectors (AVX-512 only),
// one(i) converts element i (the rest).
template <typename Vec, typename One>
void blocks(size_t n, bool avx, Vec vec, One one) {
  const long count = long((n + kBlock - 1) / kBlock);
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (long b = 0; b < count; ++b) {
    const size_t i0 = size_t(b) * kBlock, len = n - i0 < kBlock ? n - i0 : kBlock;
    size_t done = 0;
    if (avx) {
      vec(i0, len);
      done = len / 16 * 16;
    }
    for (size_t i = i0 + done; i < i0 + len; ++i) one(i);
  }
}

}  // namespace

void bf16ToF32(float* out, const bf16* in, size_t n) {
  const auto* src = reinterpret_cast<const uint16_t*>(in);
  auto* dst = reinterpret_cast<uint32_t*>(out);
  blocks(
      n, haveAvx512(),
      [&](size_t i0, size_t len) { detail::bf16ToF32Avx512(out + i0, src + i0, len); },
      [&](size_t i) { dst[i] = static_cast<uint32_t>(src[i]) << 16; });
}

void f32ToBf16(bf16* out, const float* in, size_t n) {
  auto* dst = reinterpret_cast<uint16_t*>(out);
  blocks(
      n, haveAvx512(),
      [&](size_t i0, size_t len) { detail::f32ToBf16Avx512(dst + i0, in + i0, len); },
      [&](size_t i) { out[i] = floatToBf16(in[i]); });
}

void roundToBf16(float* x, size_t n) {
  blocks(
      n, haveAvx512(), [&](size_t i0, size_t len) { detail::roundToBf16Avx512(x + i0, len); },
      [&](size_t i) { x[i] = bf16ToFloat(floatToBf16(x[i])); });
}

void detail::roundToBf16Scalar(float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) x[i] = bf16ToFloat(floatToBf16(x[i]));
}

}  // namespace ds::runtime
