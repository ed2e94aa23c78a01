// Test harness standing in for the parameter owner: flat fp32 values and grads (plus bf16 copies
// in bf16 mode) behind a ParamTable, and hooks that expose a parameter only inside the blocks
// that list it (as ZeRO stage 3 does), recording the hook order. Header-only test helper.
#pragma once

#include <string>
#include <vector>

#include "core/dtype.h"
#include "runtime/model/model.h"
#include "zero/param_table.h"

namespace ds::test {

class ParamOwner : public zero::BlockHooks {
 public:
  ParamOwner(const runtime::Model& m, bool useBf16, bool gate)
      : infos_(m.params()), bf16_(useBf16), gate_(gate) {
    size_t n = 0;
    for (const auto& p : infos_) {
      offsets_.push_back(n);
      n += p.numel;
    }
    flat.assign(n, 0.0f);
    grad.assign(n, 0.0f);
    flat16.assign(n, bf16{0});
    table.value.assign(infos_.size(), nullptr);
    table.value16.assign(infos_.size(), nullptr);
    table.grad.assign(infos_.size(), nullptr);
    if (!gate_) exposeAll();
  }

  // Call after changing flat (refreshes the bf16 copies).
  void sync() {
    for (size_t i = 0; i < flat.size(); ++i) flat16[i] = floatToBf16(flat[i]);
    if (!gate_) exposeAll();
  }
  void zeroGrad() { std::fill(grad.begin(), grad.end(), 0.0f); }
  size_t offset(size_t i) const { return offsets_[i]; }

  void beforeForward(int b) override { expose(b, "F+"); }
  void afterForward(int b) override { hide(b, "F-"); }
  void beforeBackward(int b) override { expose(b, "B+"); }
  void afterBackward(int b) override { hide(b, "B-"); }

  std::vector<float> flat, grad;
  std::vector<bf16> flat16;
  zero::ParamTable table;
  std::vector<std::string> events;  // "F+0", "F-0", ..., "B+3", ...

 private:
  void set(size_t i, bool on) {
    table.value[i] = on && !bf16_ ? flat.data() + offsets_[i] : nullptr;
    table.value16[i] = on && bf16_ ? flat16.data() + offsets_[i] : nullptr;
    table.grad[i] = on ? grad.data() + offsets_[i] : nullptr;
  }
  void exposeAll() {
    for (size_t i = 0; i < infos_.size(); ++i) set(i, true);
  }
  void expose(int b, const char* ev) {
    events.push_back(ev + std::to_string(b));
    if (!gate_) return;
    for (size_t i = 0; i < infos_.size(); ++i) {
      for (int blk : infos_[i].blocks)
        if (blk == b) set(i, true);
    }
  }
  void hide(int b, const char* ev) {
    events.push_back(ev + std::to_string(b));
    if (gate_)
      for (size_t i = 0; i < infos_.size(); ++i) set(i, false);
  }

  const std::vector<zero::ParamInfo>& infos_;
  bool bf16_, gate_;
  std::vector<size_t> offsets_;
};

}  // namespace ds::test
