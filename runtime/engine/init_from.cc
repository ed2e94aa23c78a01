// loadInitWeights (see init_from.h): read with loadLlmcCheckpoint, then compare the header's shape
// with the plan field by field (llm.c header names next to the plan's keys).
#include "runtime/engine/init_from.h"

#include <fmt/format.h>

#include "core/error.h"

namespace ds::runtime {
namespace {

// The file's weights for a model with fewer positions: every tensor as it is, except wpe, of
// which the first want.seqLen rows (positions) are kept, as llm.c does for a shorter T.
std::vector<float> firstPositions(const std::vector<float>& flat, const ModelConfig& file,
                                  const ModelConfig& want) {
  const auto from = makeModel(file)->params();
  const auto to = makeModel(want)->params();
  DS_CHECK(from.size() == to.size(), "init_from: parameter lists differ");
  std::vector<float> out;
  size_t off = 0;
  for (size_t i = 0; i < from.size(); ++i) {
    DS_CHECK(from[i].name == to[i].name && to[i].numel <= from[i].numel,
             "init_from: parameter {} vs {}", from[i].name, to[i].name);
    out.insert(out.end(), flat.begin() + long(off), flat.begin() + long(off + to[i].numel));
    off += from[i].numel;
  }
  return out;
}

}  // namespace

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
  for (const auto& f : fields) {
    if (f.got == f.planned || (f.header == std::string("maxT") && f.planned < f.got)) continue;
    throw ConfigError(fmt::format(
        "{}: model.gpt.init_from {}: the file's header has {} = {} but the plan's "
        "model.gpt.{} = {}; set the model block to the file's shape{} or use a matching file",
        plan.source, plan.initFrom, f.header, f.got, f.key, f.planned,
        f.header == std::string("maxT") ? " (seq_len may be smaller than maxT)" : ""));
  }
  if (file.seqLen == want.seqLen) return flat;
  return firstPositions(flat, file, want);
}

}  // namespace ds::runtime
