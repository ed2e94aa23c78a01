// The vocabulary-parallel tied embedding and LM head of the training GPT-2 over the
// DATA-parallel group (issue 15 item 3): ZeRO stage 3 keeps wte split by whole vocabulary rows
// (zero::ParamInfo::rowSharded) and never gathers it. Unlike the tensor-parallel head
// (gpt2_tensor.h), the ranks hold different tokens, so every step the positions of all ranks are
// shared (token ids, final hidden states: [positions, C], small next to V x C):
//   embedding forward: each rank fills the rows it owns for every rank's tokens (zeros elsewhere),
//     one reduce-scatter returns each rank its own positions (exactly one rank adds a non-zero
//     row: the same bits as the gathered lookup), then wpe;
//   embedding backward: the d(embedding) of all ranks is allgathered; each rank accumulates its
//     own rows over every rank's positions: the data-parallel sum, no reduction after;
//   head: the final LayerNorm outputs of all ranks are allgathered, each rank computes the logits
//     of all positions over its rows, the softmax is combined across ranks (gpt2_tensor.h's
//     vocabulary-parallel cross-entropy, one call per rank's segment of positions so each rank
//     gets its own mean loss); backward: dlogits on own rows, d(wte rows) = dlogits^T h_all
//     (local, already summed over ranks), d(h_all) partial sums reduce-scattered to the owners.
// FLOPs per rank are those of the gathered head; memory: no V x C buffer. Rounding: the logits
// reductions and the wte gradient sums run in another order than at stages 0-2 (not bitwise).
// Invariant: every rank of the group makes the same calls in the same order (collective).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ds::comm {
class ProcessGroup;
}

namespace ds::runtime {

struct DataVocab {
  comm::ProcessGroup* group = nullptr;  // the data-parallel group (not owned); null when off
  int rank = 0, size = 1;
  bool enabled() const { return group != nullptr && size > 1; }
  // Rows of wte per rank: ceil(rows / size) (zero::Stage3Layout's rowSharded chunk); rank r
  // holds [r * perRank, min((r + 1) * perRank, rows)).
  int64_t rowsPerRank(int64_t rows) const { return (rows + size - 1) / size; }
};

// positions[q] = rank q's `mine` (allgather; a single small collective).
std::vector<size_t> dataVocabCounts(const DataVocab& dv, size_t mine);
// all = concatenation over ranks of each rank's [counts[q] * width] block (mine = this rank's).
void dataVocabAllgather(const DataVocab& dv, const float* mine, float* all,
                        const std::vector<size_t>& counts, size_t width, const char* what);
void dataVocabAllgather(const DataVocab& dv, const int32_t* mine, int32_t* all,
                        const std::vector<size_t>& counts, const char* what);
// mine = sum over ranks of their `all` [sum counts * width], this rank's block.
void dataVocabReduceScatter(const DataVocab& dv, const float* all, float* mine,
                            const std::vector<size_t>& counts, size_t width, const char* what);

// out[own positions, C] = wte rows of every rank's tokens (tokensAll, counts per rank), summed
// over the group, plus wpe (position = index within the rank's [B, T] % T). scratch: [sum
// counts * C].
void dataVocabEmbeddingForward(const DataVocab& dv, float* out, const int32_t* tokensAll,
                               const std::vector<size_t>& counts, const float* wteLocal,
                               const float* wpe, int T, int C, int64_t vocabBegin, int64_t rows,
                               float* scratch);
// ACCUMULATES d(wte own rows) from every rank's dout and d(wpe) from this rank's dout.
void dataVocabEmbeddingBackward(const DataVocab& dv, float* dwteLocal, float* dwpe,
                                const float* dout, const int32_t* tokensAll,
                                const std::vector<size_t>& counts, int T, int C, int64_t vocabBegin,
                                int64_t rows, float* scratch);

}  // namespace ds::runtime
