// The per-layer parameter tensors of the GPT-2 model, in llm.c's order: the order Gpt2Model
// keeps them in (one flat buffer per block) and the order the KV-cached decoder reads them in.
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

}  // namespace ds::runtime::gpt2
