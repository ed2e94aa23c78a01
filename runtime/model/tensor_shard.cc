// See tensor_shard.h: the Megatron split of GPT-2 parameters over the tensor axis.
#include "runtime/model/tensor_shard.h"

#include <fmt/format.h>

#include <cstring>

#include "core/error.h"

namespace ds::runtime {

namespace {
bool endsWith(const std::string& str, const std::string& tail) {
  return str.size() >= tail.size() && str.compare(str.size() - tail.size(), tail.size(), tail) == 0;
}
}  // namespace

void TensorShard::check(const std::string& name) const {
  if (tensor < 1) throw ConfigError(fmt::format("{}: tensor parallel size {} < 1", name, tensor));
  if (kind == ShardKind::kRows && rows % (int64_t{segments} * tensor) != 0)
    throw ConfigError(fmt::format("{}: {} rows ({} segment(s)) do not split over tensor {}", name,
                                  rows, segments, tensor));
  if (kind == ShardKind::kCols && cols % tensor != 0)
    throw ConfigError(
        fmt::format("{}: {} columns do not split over tensor {}", name, cols, tensor));
}

int64_t TensorShard::localRows() const { return kind == ShardKind::kRows ? rows / tensor : rows; }
int64_t TensorShard::localCols() const { return kind == ShardKind::kCols ? cols / tensor : cols; }

void TensorShard::scatter(const float* canonical, float* local, int rank) const {
  const auto bytes = [](int64_t count) { return static_cast<size_t>(count) * sizeof(float); };
  if (kind == ShardKind::kReplicated) {
    std::memcpy(local, canonical, bytes(rows * cols));
  } else if (kind == ShardKind::kRows) {
    const int64_t segRows = rows / segments, part = segRows / tensor;
    for (int seg = 0; seg < segments; ++seg)
      std::memcpy(local + seg * part * cols, canonical + (seg * segRows + rank * part) * cols,
                  bytes(part * cols));
  } else {
    const int64_t part = cols / tensor;
    for (int64_t row = 0; row < rows; ++row)
      std::memcpy(local + row * part, canonical + row * cols + rank * part, bytes(part));
  }
}

void TensorShard::gather(const float* local, float* canonical, int rank) const {
  const auto bytes = [](int64_t count) { return static_cast<size_t>(count) * sizeof(float); };
  if (kind == ShardKind::kReplicated) {
    std::memcpy(canonical, local, bytes(rows * cols));
  } else if (kind == ShardKind::kRows) {
    const int64_t segRows = rows / segments, part = segRows / tensor;
    for (int seg = 0; seg < segments; ++seg)
      std::memcpy(canonical + (seg * segRows + rank * part) * cols, local + seg * part * cols,
                  bytes(part * cols));
  } else {
    const int64_t part = cols / tensor;
    for (int64_t row = 0; row < rows; ++row)
      std::memcpy(canonical + row * cols + rank * part, local + row * part, bytes(part));
  }
}

TensorShard gpt2TensorShard(const std::string& name, const std::vector<int64_t>& shape,
                            int tensor) {
  if (shape.empty() || shape.size() > 2)
    throw ConfigError(fmt::format("{}: tensor split expects a vector or a matrix, got {} dims",
                                  name, shape.size()));
  TensorShard shard;
  shard.rows = shape[0];
  shard.cols = shape.size() == 2 ? shape[1] : 1;
  shard.tensor = tensor;
  if (name == "wte" || endsWith(name, ".fcw") || endsWith(name, ".fcb")) {
    shard.kind = ShardKind::kRows;
  } else if (endsWith(name, ".qkvw") || endsWith(name, ".qkvb")) {
    shard.kind = ShardKind::kRows;
    shard.segments = 3;
  } else if (endsWith(name, ".attprojw") || endsWith(name, ".fcprojw")) {
    shard.kind = ShardKind::kCols;
  } else if (name == "wpe" || name == "lnfw" || name == "lnfb" || endsWith(name, ".ln1w") ||
             endsWith(name, ".ln1b") || endsWith(name, ".ln2w") || endsWith(name, ".ln2b") ||
             endsWith(name, ".attprojb") || endsWith(name, ".fcprojb")) {
    shard.kind = ShardKind::kReplicated;
  } else {
    throw ConfigError(
        fmt::format("{}: no tensor-parallel split is defined for this parameter", name));
  }
  shard.check(name);
  return shard;
}

}  // namespace ds::runtime
