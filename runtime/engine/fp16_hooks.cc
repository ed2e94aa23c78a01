// Fp16Hooks and roundToFp16 (see fp16_hooks.h). The rounding works on fp32 bits: normal fp16
// values keep 10 mantissa bits (round to nearest even), fp16 subnormals are multiples of 2^-24.
#include "runtime/engine/fp16_hooks.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "core/error.h"

namespace ds::runtime {

void roundToFp16(float* x, size_t n) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, &x[i], 4);
    const uint32_t a = u & 0x7fffffffu, sign = u & 0x80000000u;
    if (a >= 0x7f800000u) continue;  // inf, NaN
    float r;
    if (a >= 0x38800000u) {  // |x| >= 2^-14: fp16 normal range (or beyond)
      uint32_t v = a + 0xfffu + ((a >> 13) & 1u);
      v &= ~0x1fffu;
      std::memcpy(&r, &v, 4);
      if (r > 65504.f) r = kInf;  // 65520 and above round past fp16's largest finite value
    } else {                      // fp16 subnormals: multiples of 2^-24, ties to even
      float f;
      std::memcpy(&f, &a, 4);
      r = std::nearbyint(f * 16777216.f) * (1.f / 16777216.f);
    }
    uint32_t w;
    std::memcpy(&w, &r, 4);
    w |= sign;
    std::memcpy(&x[i], &w, 4);
  }
}

Fp16Hooks::Fp16Hooks(zero::BlockHooks& inner, std::function<zero::ParamTable&()> table,
                     const std::vector<zero::ParamInfo>& params, int numBlocks)
    : inner_(inner),
      table_(std::move(table)),
      blockParams_(size_t(numBlocks)),
      saved_(params.size(), nullptr) {
  for (size_t i = 0; i < params.size(); ++i) {
    numel_.push_back(params[i].numel);
    for (int b : params[i].blocks)
      if (b >= 0 && b < numBlocks) blockParams_[size_t(b)].push_back(i);
  }
}

void Fp16Hooks::enter(int b) {
  if (active_ >= 0)
    throw InternalError(
        fmt::format("Fp16Hooks: block {} entered while block {} is still active "
                    "(hooks must not nest)",
                    b, active_));
  active_ = b;
  auto& t = table_();
  size_t need = 0;
  for (size_t i : blockParams_[size_t(b)]) need += numel_[i];
  if (scratch_.size() < need) scratch_.resize(need);
  size_t off = 0;
  for (size_t i : blockParams_[size_t(b)]) {
    if (i >= t.value.size() || !t.value[i]) continue;
    float* c = scratch_.data() + off;
    off += numel_[i];
    std::memcpy(c, t.value[i], numel_[i] * sizeof(float));
    roundToFp16(c, numel_[i]);
    saved_[i] = t.value[i];
    t.value[i] = c;
  }
}

void Fp16Hooks::leave(int b) {
  auto& t = table_();
  for (size_t i : blockParams_[size_t(b)]) {
    if (!saved_[i]) continue;
    t.value[i] = saved_[i];
    saved_[i] = nullptr;
  }
  active_ = -1;
}

void Fp16Hooks::beforeForward(int b) {
  inner_.beforeForward(b);
  enter(b);
}

void Fp16Hooks::afterForward(int b) {
  leave(b);
  inner_.afterForward(b);
}

void Fp16Hooks::beforeBackward(int b) {
  inner_.beforeBackward(b);
  enter(b);
}

void Fp16Hooks::afterBackward(int b) {
  leave(b);
  auto& t = table_();
  for (size_t i : blockParams_[size_t(b)])
    if (i < t.grad.size() && t.grad[i]) roundToFp16(t.grad[i], numel_[i]);
  inner_.afterBackward(b);
}

}  // namespace ds::runtime
