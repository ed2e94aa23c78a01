// An independent gradient for the engine tests: the plan's model on plain buffers (no ZeroEngine,
// no hooks, no Trainer), its initial weights, and the n-th global micro-batch drawn by a
// one-rank DataLoader over the same corpus, so the Trainer's reported norm, clipping and fp16
// overflow can be checked against values computed without any of the code under test.
#pragma once

#include <cmath>
#include <vector>

#include "runtime/config/plan.h"
#include "runtime/data/corpora.h"
#include "runtime/data/data_loader.h"
#include "runtime/engine/fp16_hooks.h"
#include "runtime/model/model.h"

namespace ds::test {

struct NoHooks : zero::BlockHooks {
  void beforeForward(int) override {}
  void afterForward(int) override {}
  void beforeBackward(int) override {}
  void afterBackward(int) override {}
};

struct ReferenceGrad {
  std::vector<float> params, grad;  // flat, params() order; grad of the mean loss (scale 1)
  double norm() const {
    double s = 0;
    for (float g : grad) s += double(g) * double(g);
    return std::sqrt(s);
  }
  double maxAbs() const {
    double m = 0;
    for (float g : grad) m = std::max(m, double(std::fabs(g)));
    return m;
  }
};

// Gradient at the initial weights (rounded to fp16 when fp16Weights) on global micro-batch
// `index` (0-based) of train_batch_size sequences.
inline ReferenceGrad referenceGrad(const runtime::Plan& p, int index = 0,
                                   bool fp16Weights = false) {
  auto model = runtime::makeModel(p.model);
  ReferenceGrad r;
  r.params.resize(model->numParamsTotal());
  model->initParams(r.params.data(), p.train.seed);
  std::vector<float> w = r.params;
  if (fp16Weights) runtime::roundToFp16(w.data(), w.size());
  r.grad.assign(w.size(), 0.f);
  zero::ParamTable t;
  size_t off = 0;
  for (const auto& info : model->params()) {
    t.value.push_back(w.data() + off);
    t.value16.push_back(nullptr);
    t.grad.push_back(r.grad.data() + off);
    off += info.numel;
  }
  auto corpora = runtime::openCorpora(
      p.data, p.model.kind == "mlp" ? p.model.sizes.front() : p.model.vocabSize);
  runtime::LoaderOptions lo;
  lo.seqLen = p.model.seqLen;
  lo.microBatch = int(p.deepspeed.trainBatchSize);
  lo.seed = p.train.seed;
  runtime::DataLoader loader(corpora.train, lo);
  runtime::Batch b;
  for (int i = 0; i <= index; ++i) loader.next(b);
  NoHooks hooks;
  model->forward(b.inputs.data(), b.targets.data(), b.B, b.T, t, hooks);
  model->backward(1.f, t, hooks);
  return r;
}

}  // namespace ds::test
