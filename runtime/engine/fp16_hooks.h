// Fp16Hooks: what makes fp16 mode faithful where the kernels compute in fp32 (the host path, and
// the device engine on an Ops: the GPU's fp16 mode, docs/gpu.md "Precision"). A BlockHooks
// decorator around the parameter owner's hooks: while a block runs forward or backward, the model
// reads fp16-rounded copies of that block's weights (fp32 masters untouched), and when a block's
// backward is done its gradients are rounded to fp16 (values of magnitude >= 65520 become inf,
// below 2^-24 flush to zero), so the engine's inf/nan check skips exactly the steps whose fp16
// gradients would overflow. Activations stay fp32 (not emulated). Memory: one scratch buffer the
// size of the largest block's parameters (blocks run one at a time, as the hooks contract says),
// in the Ops' memory when an Ops is given (then the table's pointers are that Ops' memory and
// the copies and rounding run on its stream), else on the host. With native fp16 compute (a GPU:
// the model reads fp16 copies and keeps fp16 activations) only the gradient rounding remains.
// Not thread-safe.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "runtime/tensor/fp16_round.h"
#include "runtime/tensor/ops.h"
#include "zero/param_table.h"

namespace ds::runtime {

class Fp16Hooks : public zero::BlockHooks {
 public:
  // table() is read at every hook (the owner may move tensors between blocks). ops: the memory
  // the table points into (nullptr: the host's).
  // roundWeights false: native fp16 compute (the model already reads fp16 copies, value16), so
  // only the gradients are rounded.
  Fp16Hooks(zero::BlockHooks& inner, std::function<zero::ParamTable&()> table,
            const std::vector<zero::ParamInfo>& params, int numBlocks, Ops* ops = nullptr,
            bool roundWeights = true);

  void beforeForward(int b) override;
  void afterForward(int b) override;
  void beforeBackward(int b) override;
  void afterBackward(int b) override;
  // The earlier parts' gradients are rounded before the owner reduces them, and the weights the
  // owner publishes for this part are redirected to rounded copies too.
  void beforeBackwardPart(int b, int part) override;

 private:
  void enter(int b);  // redirect table().value of block b's params to rounded copies
  void leave(int b);  // restore the owner's pointers
  void roundGrads(int b, int beforePart);  // block b's gradients (of params of earlier parts)

  zero::BlockHooks& inner_;
  std::function<zero::ParamTable&()> table_;
  std::vector<size_t> numel_;
  std::vector<std::vector<size_t>> blockParams_;  // [block] -> param indices
  std::vector<int> part_;                         // [param] ParamInfo::backwardPart
  std::vector<float> scratch_;                    // the active block's rounded weights (host)
  Ops* ops_ = nullptr;                            // set: the table is this Ops' memory
  OpsBuffer devScratch_;                          // ops_ set: the rounded weights there
  size_t devScratchFloats_ = 0;
  std::vector<float*> saved_;  // [param] the owner's pointer while redirected
  int active_ = -1;            // block whose weights are redirected
  bool roundWeights_ = true;   // false: native fp16 compute, gradients only
};

}  // namespace ds::runtime
