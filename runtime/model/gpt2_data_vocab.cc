// The data-parallel vocabulary head's comm points and embedding (see gpt2_data_vocab.h).
#include "runtime/model/gpt2_data_vocab.h"

#include <fmt/format.h>

#include <functional>
#include <numeric>

#include "comm/process_group.h"
#include "core/error.h"

namespace ds::runtime {

namespace {

// Runs one collective of the group (waited, with ds::defaultTimeout()), naming `what` and the
// rank in any failure.
void collective(const DataVocab& dv, const char* what, const std::function<void()>& run) {
  if (dv.group == nullptr)
    throw InternalError(
        fmt::format("gpt2 data-parallel vocabulary: size {} without a group ({})", dv.size, what));
  try {
    run();
  } catch (const Error& e) {
    throw CommError(fmt::format("gpt2 data-parallel vocabulary: {} on data rank {} of {}: {}", what,
                                dv.rank, dv.size, e.what()));
  }
}

std::vector<size_t> times(const std::vector<size_t>& counts, size_t width) {
  std::vector<size_t> out(counts);
  for (size_t& count : out) count *= width;
  return out;
}

}  // namespace

std::vector<size_t> dataVocabCounts(const DataVocab& dv, size_t mine) {
  std::vector<int64_t> all(size_t(dv.size), 0);
  int64_t value = int64_t(mine);
  collective(dv, "the allgather of the positions per rank", [&] {
    dv.group
        ->allgather({&value, 1, DType::kI64, comm::Device::kCpu},
                    {all.data(), all.size(), DType::kI64, comm::Device::kCpu},
                    std::vector<size_t>(size_t(dv.size), 1))
        ->wait();
  });
  return {all.begin(), all.end()};
}

void dataVocabAllgather(const DataVocab& dv, const float* mine, float* all,
                        const std::vector<size_t>& counts, size_t width, const char* what) {
  const std::vector<size_t> sizes = times(counts, width);
  const size_t total = std::accumulate(sizes.begin(), sizes.end(), size_t{0});
  collective(dv, what, [&] {
    dv.group
        ->allgather(comm::view(const_cast<float*>(mine), sizes[size_t(dv.rank)]),
                    comm::view(all, total), sizes)
        ->wait();
  });
}

void dataVocabAllgather(const DataVocab& dv, const int32_t* mine, int32_t* all,
                        const std::vector<size_t>& counts, const char* what) {
  const size_t total = std::accumulate(counts.begin(), counts.end(), size_t{0});
  collective(dv, what, [&] {
    dv.group
        ->allgather(
            {const_cast<int32_t*>(mine), counts[size_t(dv.rank)], DType::kI32, comm::Device::kCpu},
            {all, total, DType::kI32, comm::Device::kCpu}, counts)
        ->wait();
  });
}

void dataVocabReduceScatter(const DataVocab& dv, const float* all, float* mine,
                            const std::vector<size_t>& counts, size_t width, const char* what) {
  const std::vector<size_t> sizes = times(counts, width);
  const size_t total = std::accumulate(sizes.begin(), sizes.end(), size_t{0});
  collective(dv, what, [&] {
    dv.group
        ->reduceScatter(comm::view(const_cast<float*>(all), total),
                        comm::view(mine, sizes[size_t(dv.rank)]), sizes)
        ->wait();
  });
}

void dataVocabEmbeddingForward(const DataVocab& dv, float* out, const int32_t* tokensAll,
                               const std::vector<size_t>& counts, const float* wteLocal,
                               const float* wpe, int T, int C, int64_t vocabBegin, int64_t rows,
                               float* scratch) {
  const size_t positions = std::accumulate(counts.begin(), counts.end(), size_t{0});
#pragma omp parallel for schedule(static)
  for (long pos = 0; pos < long(positions); ++pos) {
    float* row = scratch + static_cast<size_t>(pos) * C;
    const int64_t local = int64_t{tokensAll[pos]} - vocabBegin;
    if (local >= 0 && local < rows) {
      const float* src = wteLocal + static_cast<size_t>(local) * C;
      for (int col = 0; col < C; ++col) row[col] = src[col];
    } else {
      for (int col = 0; col < C; ++col) row[col] = 0.0f;
    }
  }
  dataVocabReduceScatter(dv, scratch, out, counts, size_t(C), "the embedding lookup");
  const size_t mine = counts[size_t(dv.rank)];
#pragma omp parallel for schedule(static)
  for (long pos = 0; pos < long(mine); ++pos) {
    float* row = out + static_cast<size_t>(pos) * C;
    const float* posRow = wpe + static_cast<size_t>(pos % T) * C;
    for (int col = 0; col < C; ++col) row[col] += posRow[col];
  }
}

void dataVocabEmbeddingBackward(const DataVocab& dv, float* dwteLocal, float* dwpe,
                                const float* dout, const int32_t* tokensAll,
                                const std::vector<size_t>& counts, int T, int C, int64_t vocabBegin,
                                int64_t rows, float* scratch) {
  dataVocabAllgather(dv, dout, scratch, counts, size_t(C), "the embedding's output gradient");
  const size_t positions = std::accumulate(counts.begin(), counts.end(), size_t{0});
  // Serial over positions in rank order (two positions may share a token row).
  for (size_t pos = 0; pos < positions; ++pos) {
    const int64_t local = int64_t{tokensAll[pos]} - vocabBegin;
    if (local < 0 || local >= rows) continue;
    const float* grad = scratch + pos * C;
    float* dst = dwteLocal + local * C;
    for (int col = 0; col < C; ++col) dst[col] += grad[col];
  }
  const size_t mine = counts[size_t(dv.rank)];
  for (size_t pos = 0; pos < mine; ++pos) {
    const float* grad = dout + pos * C;
    float* dpos = dwpe + (pos % size_t(T)) * C;
    for (int col = 0; col < C; ++col) dpos[col] += grad[col];
  }
}

}  // namespace ds::runtime
