// The per-layer parameter tensors of the GPT-2 model, in llm.c's order: the order Gpt2Model
// keeps them in (one flat buffer per block) and the order the KV-cached decoder reads them in;
// and a layer's activation fields, shared by the two GPT-2 models.
#pragma once

namespace ds::runtime::gpt2 {

enum LayerKind {
  kLn1w,
  kLn1b,
  kQkvw,
  kQkvb,
  kAttprojw,
  kAttprojb,
  kLn2w,
  kLn2b,
  kFcw,
  kFcb,
  kFcprojw,
  kFcprojb,
  kLayerKinds
};

// A layer's activation fields, in the order both GPT-2 models (the host Gpt2Model and the op
// model OpsGpt2Model) keep them.
enum LayerField {
  fLn1,
  fLn1Mean,
  fLn1Rstd,
  fQkv,
  fAtt,
  fAtty,
  fRes2,
  fLn2,
  fLn2Mean,
  fLn2Rstd,
  fFch,
  fFchGelu,
  kLayerFields
};

}  // namespace ds::runtime::gpt2
