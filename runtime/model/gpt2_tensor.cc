// The tensor-parallel comm points of the training GPT-2 (see gpt2_tensor.h).
#include "runtime/model/gpt2_tensor.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <vector>

#include "comm/process_group.h"
#include "core/error.h"

namespace ds::runtime {

namespace {

void allreduceOp(const TensorParallel& tp, float* buf, size_t count, comm::ReduceOp op,
                 const char* what) {
  if (!tp.enabled() || count == 0) return;
  if (tp.group == nullptr)
    throw InternalError(
        fmt::format("gpt2 tensor parallel: size {} without a group ({})", tp.size, what));
  try {
    tp.group->allreduce(comm::view(buf, count), op)->wait();
  } catch (const Error& e) {
    throw CommError(
        fmt::format("gpt2 tensor parallel: allreduce of {} ({} floats) on tensor rank {} of {}: {}",
                    what, count, tp.rank, tp.size, e.what()));
  }
}

}  // namespace

void tensorAllreduce(const TensorParallel& tp, float* buf, size_t count, const char* what) {
  allreduceOp(tp, buf, count, comm::ReduceOp::kSum, what);
}

void tensorEmbeddingForward(const TensorParallel& tp, float* out, const int32_t* tokens,
                            const float* wteLocal, const float* wpe, int B, int T, int C,
                            int64_t vocabBegin, int64_t rows) {
  const size_t positions = static_cast<size_t>(B) * T;
#pragma omp parallel for schedule(static)
  for (long pos = 0; pos < long(positions); ++pos) {
    float* row = out + static_cast<size_t>(pos) * C;
    const int64_t local = int64_t{tokens[pos]} - vocabBegin;
    if (local >= 0 && local < rows) {
      const float* src = wteLocal + static_cast<size_t>(local) * C;
      for (int col = 0; col < C; ++col) row[col] = src[col];
    } else {
      for (int col = 0; col < C; ++col) row[col] = 0.0f;
    }
  }
  tensorAllreduce(tp, out, positions * C, "the embedding lookup");
#pragma omp parallel for schedule(static)
  for (long pos = 0; pos < long(positions); ++pos) {
    float* row = out + static_cast<size_t>(pos) * C;
    const float* posRow = wpe + static_cast<size_t>(pos % T) * C;
    for (int col = 0; col < C; ++col) row[col] += posRow[col];
  }
}

void tensorEmbeddingBackward(float* dwteLocal, float* dwpe, const float* dout,
                             const int32_t* tokens, int B, int T, int C, int64_t vocabBegin,
                             int64_t rows) {
  // Serial over positions (two positions may share a token row); the order matches
  // encoderBackward's, so the sums round the same way.
  for (int64_t pos = 0; pos < int64_t{B} * T; ++pos) {
    const float* grad = dout + pos * C;
    const int64_t local = int64_t{tokens[pos]} - vocabBegin;
    if (local >= 0 && local < rows) {
      float* dst = dwteLocal + local * C;
      for (int col = 0; col < C; ++col) dst[col] += grad[col];
    }
    float* dpos = dwpe + (pos % T) * C;
    for (int col = 0; col < C; ++col) dpos[col] += grad[col];
  }
}

double tensorCrossEntropyForward(const TensorParallel& tp, float* logitsToProbs,
                                 const int32_t* targets, int N, int cols, int64_t vocabBegin,
                                 int* valid) {
  const size_t rowsN = static_cast<size_t>(N);
  std::vector<float> rowMax(rowsN, -std::numeric_limits<float>::infinity());
  for (size_t row = 0; row < rowsN; ++row) {
    const float* logits = logitsToProbs + row * cols;
    for (int col = 0; col < cols; ++col) rowMax[row] = std::max(rowMax[row], logits[col]);
  }
  allreduceOp(tp, rowMax.data(), rowsN, comm::ReduceOp::kMax, "the logits' row maxima");
  // [0, N): sum of exp(l - max) over this rank's columns; [N, 2N): the shifted target logit
  // where this rank holds the target (0 elsewhere). One allreduce sums both over the group.
  std::vector<float> sums(2 * rowsN, 0.0f);
#pragma omp parallel for schedule(static)
  for (long row = 0; row < long(N); ++row) {
    float* logits = logitsToProbs + static_cast<size_t>(row) * cols;
    const float mx = rowMax[size_t(row)];
    const int64_t local = int64_t{targets[row]} - vocabBegin;
    if (targets[row] >= 0 && local >= 0 && local < cols)
      sums[rowsN + size_t(row)] = logits[local] - mx;
    double sum = 0;
    for (int col = 0; col < cols; ++col) {
      logits[col] = std::exp(logits[col] - mx);
      sum += logits[col];
    }
    sums[size_t(row)] = static_cast<float>(sum);
  }
  tensorAllreduce(tp, sums.data(), sums.size(), "the softmax sums and target logits");
  double total = 0;
  int count = 0;
  for (size_t row = 0; row < rowsN; ++row) {
    const float inv = 1.0f / sums[row];
    float* probs = logitsToProbs + row * cols;
    for (int col = 0; col < cols; ++col) probs[col] *= inv;
    if (targets[row] < 0) continue;
    total += std::log(double(sums[row])) - double(sums[rowsN + row]);
    ++count;
  }
  if (valid != nullptr) *valid = count;
  return total;
}

void tensorCrossEntropyBackward(float* dlogits, const float* probs, const int32_t* targets, int N,
                                int cols, int64_t vocabBegin, float scale) {
#pragma omp parallel for schedule(static)
  for (long row = 0; row < long(N); ++row) {
    float* grad = dlogits + static_cast<size_t>(row) * cols;
    const float* prob = probs + static_cast<size_t>(row) * cols;
    if (targets[row] < 0) {
      for (int col = 0; col < cols; ++col) grad[col] = 0.0f;
      continue;
    }
    for (int col = 0; col < cols; ++col) grad[col] = prob[col] * scale;
    const int64_t local = int64_t{targets[row]} - vocabBegin;
    if (local >= 0 && local < cols) grad[local] -= scale;
  }
}

}  // namespace ds::runtime
