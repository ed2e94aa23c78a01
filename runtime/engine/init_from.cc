// InitWeights (see init_from.h): the header compared with the plan field by field (llm.c header
// names next to the plan's keys), then ranges of the plan's flat space mapped to the file's.
#include "runtime/engine/init_from.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"

namespace ds::runtime {
namespace {

void checkHeader(const Plan& plan, const ModelConfig& file) {
  const ModelConfig& want = plan.model;
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
}

}  // namespace

InitWeights::InitWeights(const Plan& plan) {
  const ModelConfig& want = plan.model;
  if (want.kind != "gpt2")
    throw ConfigError(fmt::format("{}: model.gpt.init_from needs model.gpt (this plan has {})",
                                  plan.source, want.kind));
  file_ = std::make_unique<LlmcFile>(plan.initFrom, want);
  checkHeader(plan, file_->header());
  // Every tensor as it is, except wpe, of which the first seq_len rows (positions) are kept:
  // a prefix of the file's tensor, so each plan parameter is one contiguous run of the file.
  const auto from = makeModel(file_->header())->params();
  const auto to = makeModel(want)->params();
  DS_CHECK(from.size() == to.size(), "init_from: parameter lists differ");
  size_t planOff = 0, fileOff = 0;
  for (size_t i = 0; i < from.size(); ++i) {
    DS_CHECK(from[i].name == to[i].name && to[i].numel <= from[i].numel,
             "init_from: parameter {} vs {}", from[i].name, to[i].name);
    planOffset_.push_back(planOff);
    fileOffset_.push_back(fileOff);
    planOff += to[i].numel;
    fileOff += from[i].numel;
  }
  planOffset_.push_back(planOff);  // end sentinel
}

void InitWeights::read(size_t offset, size_t count, float* out) const {
  DS_CHECK(offset + count <= planOffset_.back(), "init_from: read of [{}, {}) past {} params",
           offset, offset + count, planOffset_.back());
  // The parameter holding `offset`: the last whose start is <= offset.
  size_t i = size_t(std::upper_bound(planOffset_.begin(), planOffset_.end(), offset) -
                    planOffset_.begin()) -
             1;
  while (count > 0) {
    const size_t n = std::min(count, planOffset_[i + 1] - offset);
    file_->read(fileOffset_[i] + (offset - planOffset_[i]), n, out);
    out += n;
    offset += n;
    count -= n;
    ++i;
  }
}

}  // namespace ds::runtime
