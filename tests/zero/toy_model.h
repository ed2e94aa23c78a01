// A tiny synthetic model for ZeRO tests: L tanh-linear blocks with a hand-written backward that
// calls the BlockHooks and reads/accumulates through the ParamTable exactly as the real model
// must (values and grads looked up inside each block). Block 0 scales its input by a vector E
// and the last block scales its output by the same E: a tied parameter (blocks {0, L-1}); with
// tieNext block 1 also scales its input by E (blocks {0, 1, L-1}: adjacent and distant uses).
// With parts, each block's backward has two parts (zero::ParamInfo::backwardPart): part 0 reads
// W_b and adds its gradient, part 1 adds c_b's (the engine hears beforeBackwardPart between).
// Deterministic: data depend only on (step, micro, row).
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "core/dtype.h"
#include "zero/zero_engine.h"

namespace ds::test {

struct ToyModel {
  int L, d;
  bool bf16;  // 16-bit weights (bf16, or fp16 when half == kF16)
  DType half = DType::kBF16;
  std::vector<zero::ParamInfo> params;  // E, then W_b, c_b per block
  // Optional: called inside every block, after its compute and before its after* hook (the
  // block has not ended yet); tests use it to observe or hold the engine mid-block.
  std::function<void(zero::ZeroEngine&, int block, bool backward)> inBlock;

  bool tieNext = false;
  bool parts = false;
  bool scalesInput(int b) const { return b == 0 || (tieNext && b == 1); }

  ToyModel(int layers, int width, bool useBf16 = false, bool tieNextBlock = false,
           bool backwardParts = false)
      : L(layers), d(width), bf16(useBf16), tieNext(tieNextBlock), parts(backwardParts) {
    std::vector<int> eb{0, L - 1};
    if (tieNext) eb = {0, 1, L - 1};
    zero::ParamInfo e{"E", {d}, size_t(d), eb, false};
    params.push_back(e);
    for (int b = 0; b < L; ++b) {
      params.push_back({"W" + std::to_string(b), {d, d}, size_t(d) * size_t(d), {b}, true});
      params.push_back({"c" + std::to_string(b), {d}, size_t(d), {b}, false});
      if (parts) params.back().backwardPart = 1;
    }
  }

  std::vector<float> init(uint32_t seed = 1) const {
    size_t n = 0;
    for (auto& p : params) n += p.numel;
    std::vector<float> v(n);
    uint32_t s = seed;
    for (size_t i = 0; i < n; ++i) {
      s = s * 1664525u + 1013904223u;
      v[i] = (float((s >> 8) & 0xffff) / 65536.f - 0.5f) * 0.6f;
    }
    for (int i = 0; i < d; ++i) v[size_t(i)] = 1.f + v[size_t(i)] * 0.3f;  // E near 1
    return v;
  }

  static float dataAt(int step, int micro, int row, int col, int salt) {
    uint32_t h = uint32_t(step * 7919 + micro * 104729 + row * 1299709 + col * 15485863 + salt);
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    return float(h & 0xffff) / 65536.f - 0.5f;
  }

  // Engine: zero::ZeroEngine, or any zero::TrainingEngine whose table holds host pointers (the
  // device engine over CpuOps in tests/runtime/engine).
  template <class Engine>
  float value(Engine& eng, int p, size_t i) const {
    auto& t = eng.table();
    if (!bf16) return t.value[size_t(p)][i];
    if (half == DType::kF16) return fp16ToFloat(fp16{t.value16[size_t(p)][i].bits});
    return bf16ToFloat(t.value16[size_t(p)][i]);
  }

  // One micro-step on rows [row0, row0+rows) of the global batch; returns the mean loss over
  // these rows. Grads are added (+=) into the table, scaled by lossScale.
  template <class Engine>
  double microStep(Engine& eng, int step, int micro, int row0, int rows,
                   float lossScale = 1.f) const {
    const size_t D = size_t(d), B = size_t(rows);
    std::vector<std::vector<float>> a(static_cast<size_t>(L) + 1, std::vector<float>(B * D));
    std::vector<std::vector<float>> u(static_cast<size_t>(L));
    for (size_t r = 0; r < B; ++r)
      for (size_t j = 0; j < D; ++j)
        a[0][r * D + j] = dataAt(step, micro, row0 + int(r), int(j), 1);
    for (int b = 0; b < L; ++b) {
      eng.beforeForward(b);
      u[size_t(b)] = a[size_t(b)];
      if (scalesInput(b))
        for (size_t r = 0; r < B; ++r)
          for (size_t j = 0; j < D; ++j) u[size_t(b)][r * D + j] *= value(eng, 0, j);
      for (size_t r = 0; r < B; ++r)
        for (size_t i = 0; i < D; ++i) {
          float z = value(eng, 2 + 2 * b, i);
          for (size_t j = 0; j < D; ++j)
            z += u[size_t(b)][r * D + j] * value(eng, 1 + 2 * b, i * D + j);
          a[size_t(b) + 1][r * D + i] = std::tanh(z);
        }
      if constexpr (std::is_same_v<Engine, zero::ZeroEngine>)
        if (inBlock) inBlock(eng, b, false);
      eng.afterForward(b);
    }
    // loss = 0.5 * sum((a_L * E - t)^2) / B; the last block computes it (it reads E)
    std::vector<float> da(B * D);
    double loss = 0;
    for (int b = L - 1; b >= 0; --b) {
      eng.beforeBackward(b);
      auto& t = eng.table();
      if (b == L - 1) {
        float* gE = t.grad[0];
        for (size_t r = 0; r < B; ++r)
          for (size_t j = 0; j < D; ++j) {
            float out = a[size_t(L)][r * D + j] * value(eng, 0, j);
            float diff = out - dataAt(step, micro, row0 + int(r), int(j), 2);
            loss += 0.5 * double(diff) * diff / double(B);
            float dout = diff / float(B) * lossScale;
            gE[j] += dout * a[size_t(L)][r * D + j];
            da[r * D + j] = dout * value(eng, 0, j);
          }
      }
      float* gW = t.grad[size_t(1 + 2 * b)];
      std::vector<float> du(B * D, 0.f), dz(B * D);
      for (size_t r = 0; r < B; ++r)
        for (size_t i = 0; i < D; ++i) {
          float y = a[size_t(b) + 1][r * D + i];
          dz[r * D + i] = da[r * D + i] * (1.f - y * y);
          for (size_t j = 0; j < D; ++j) {
            gW[i * D + j] += dz[r * D + i] * u[size_t(b)][r * D + j];
            du[r * D + j] += dz[r * D + i] * value(eng, 1 + 2 * b, i * D + j);
          }
        }
      if (parts) eng.beforeBackwardPart(b, 1);
      float* gc = eng.table().grad[size_t(2 + 2 * b)];
      for (size_t r = 0; r < B; ++r)
        for (size_t i = 0; i < D; ++i) gc[i] += dz[r * D + i];
      if (scalesInput(b)) {  // u = a * E: dE += du * a, da = du * E
        float* gE = t.grad[0];
        for (size_t r = 0; r < B; ++r)
          for (size_t j = 0; j < D; ++j) {
            gE[j] += du[r * D + j] * a[size_t(b)][r * D + j];
            if (b > 0) du[r * D + j] *= value(eng, 0, j);
          }
      }
      da = du;
      if constexpr (std::is_same_v<Engine, zero::ZeroEngine>)
        if (inBlock) inBlock(eng, b, true);
      eng.afterBackward(b);
    }
    return loss;
  }
};

}  // namespace ds::test
