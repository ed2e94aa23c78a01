// loadInitWeights (see init_from.h): read with loadLlmcCheckpoint, then compare the header's shape
// with the plan field by field (llm.c header names next to the plan's keys).
#include "runtime/engine/init_from.h"

#include <fmt/format.h>

#include "core/error.h"

namespace ds::runtime {

std::vector<float> loadInitWeights(const Plan& plan) {
  const ModelConfig& want = plan.model;
  if (want.kind != "gpt2")
    throw ConfigError(fmt::format("{}: model.gpt.init_from needs model.gpt (this plan has {})",
                                  plan.source, want.kind));
  ModelConfig file = want;
  std::vector<float> flat;
  loadLlmcCheckpoint(plan.initFrom, file, flat);
  struct Field {
    const char* header;
    const char* key;
    int got, planned;
  };
  const int wantVp = want.paddedVocab ? want.paddedVocab : want.vocabSize;
  const Field fields[] = {{"maxT", "seq_len", file.seqLen, want.seqLen},
                          {"V", "vocab_size", file.vocabSize, want.vocabSize},
                          {"L", "n_layer", file.nLayer, want.nLayer},
                          {"NH", "n_head", file.nHead, want.nHead},
                          {"C", "n_embd", file.nEmbd, want.nEmbd},
                          {"Vp", "padded_vocab_size", file.paddedVocab, wantVp}};
  for (const auto& f : fields)
    if (f.got != f.planned)
      throw ConfigError(fmt::format(
          "{}: model.gpt.init_from {}: the file's header has {} = {} but the plan's "
          "model.gpt.{} = {}; set the model block to the file's shape or use a matching file",
          plan.source, plan.initFrom, f.header, f.got, f.key, f.planned));
  return flat;
}

}  // namespace ds::runtime
