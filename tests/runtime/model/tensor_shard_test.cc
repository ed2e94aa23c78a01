// The Megatron split of GPT-2 parameters: which part each tensor rank holds, that the shards
// cover a tensor exactly once and round-trip, that split linears reproduce the unsplit one
// (column-parallel: concatenated outputs; row-parallel: summed partial outputs), and the
// refusals of splits that do not divide.
#include <catch2/catch.hpp>

#include <numeric>
#include <vector>

#include "core/error.h"
#include "runtime/model/tensor_shard.h"

using namespace ds::runtime;
using Catch::Matchers::Contains;

namespace {
std::vector<float> iota(int64_t count) {
  std::vector<float> vec(static_cast<size_t>(count));
  std::iota(vec.begin(), vec.end(), 0.0f);
  return vec;
}

// out[o] = sum_i w[o, i] * x[i]; w is [outs, ins] row-major (llm.c's layout).
std::vector<float> matvec(const std::vector<float>& wgt, const std::vector<float>& vec,
                          int64_t outs, int64_t ins) {
  std::vector<float> out(static_cast<size_t>(outs), 0.0f);
  for (int64_t row = 0; row < outs; ++row)
    for (int64_t col = 0; col < ins; ++col) out[row] += wgt[row * ins + col] * vec[col];
  return out;
}
}  // namespace

TEST_CASE("tensor shard: kinds of the GPT-2 parameters", "[unit]") {
  const int64_t width = 8;
  CHECK(gpt2TensorShard("wte", {64, width}, 2).kind == ShardKind::kRows);
  CHECK(gpt2TensorShard("wpe", {16, width}, 2).kind == ShardKind::kReplicated);
  CHECK(gpt2TensorShard("h.0.qkvw", {3 * width, width}, 2).segments == 3);
  CHECK(gpt2TensorShard("h.1.qkvb", {3 * width}, 2).localNumel() == 3 * width / 2);
  CHECK(gpt2TensorShard("h.0.attprojw", {width, width}, 2).kind == ShardKind::kCols);
  CHECK(gpt2TensorShard("h.0.attprojb", {width}, 2).kind == ShardKind::kReplicated);
  CHECK(gpt2TensorShard("h.0.fcw", {4 * width, width}, 2).localRows() == 2 * width);
  CHECK(gpt2TensorShard("h.0.fcprojw", {width, 4 * width}, 2).localCols() == 2 * width);
  CHECK(gpt2TensorShard("h.0.fcprojb", {width}, 2).kind == ShardKind::kReplicated);
  CHECK(gpt2TensorShard("h.3.ln2b", {width}, 4).localNumel() == width);
  CHECK(gpt2TensorShard("lnfw", {width}, 2).kind == ShardKind::kReplicated);
}

TEST_CASE("tensor shard: qkv rank r holds its heads' q, k and v rows", "[unit]") {
  const int64_t width = 4;  // 2 heads of size 2 at T=2
  const TensorShard shard = gpt2TensorShard("h.0.qkvb", {3 * width}, 2);
  const std::vector<float> canon = iota(3 * width);
  std::vector<float> local(static_cast<size_t>(shard.localNumel()));
  shard.scatter(canon.data(), local.data(), 1);
  CHECK(local == std::vector<float>{2, 3, 6, 7, 10, 11});
}

TEST_CASE("tensor shard: shards cover the tensor once and round-trip", "[unit]") {
  for (int tensor : {1, 2, 4}) {
    for (const auto& [name, shape] :
         std::vector<std::pair<std::string, std::vector<int64_t>>>{{"wte", {32, 8}},
                                                                   {"h.0.qkvw", {24, 8}},
                                                                   {"h.0.attprojw", {8, 8}},
                                                                   {"h.0.fcprojw", {8, 32}},
                                                                   {"h.0.fcb", {32}},
                                                                   {"lnfb", {8}}}) {
      const TensorShard shard = gpt2TensorShard(name, shape, tensor);
      const std::vector<float> canon = iota(shard.rows * shard.cols);
      std::vector<float> back(canon.size(), -1.0f);
      int64_t held = 0;
      for (int rank = 0; rank < tensor; ++rank) {
        std::vector<float> local(static_cast<size_t>(shard.localNumel()));
        shard.scatter(canon.data(), local.data(), rank);
        shard.gather(local.data(), back.data(), rank);
        held += shard.localNumel();
      }
      INFO(name << " at tensor " << tensor);
      CHECK(back == canon);
      if (shard.kind != ShardKind::kReplicated) CHECK(held == shard.rows * shard.cols);
    }
  }
}

TEST_CASE("tensor shard: split linears reproduce the unsplit one", "[unit]") {
  const int64_t width = 8, tensor = 2;
  const std::vector<float> input = iota(width);
  SECTION("column-parallel fc: each rank computes its slice of the outputs") {
    const TensorShard shard = gpt2TensorShard("h.0.fcw", {4 * width, width}, tensor);
    const std::vector<float> wgt = iota(4 * width * width);
    const std::vector<float> full = matvec(wgt, input, 4 * width, width);
    std::vector<float> joined;
    for (int rank = 0; rank < tensor; ++rank) {
      std::vector<float> local(static_cast<size_t>(shard.localNumel()));
      shard.scatter(wgt.data(), local.data(), rank);
      const std::vector<float> part = matvec(local, input, shard.localRows(), width);
      joined.insert(joined.end(), part.begin(), part.end());
    }
    CHECK(joined == full);
  }
  SECTION("row-parallel fcproj: partial outputs summed (the allreduce) give the output") {
    const TensorShard shard = gpt2TensorShard("h.0.fcprojw", {width, 4 * width}, tensor);
    const std::vector<float> wgt = iota(width * 4 * width);
    const std::vector<float> hidden = iota(4 * width);
    const std::vector<float> full = matvec(wgt, hidden, width, 4 * width);
    std::vector<float> summed(static_cast<size_t>(width), 0.0f);
    for (int rank = 0; rank < tensor; ++rank) {
      std::vector<float> local(static_cast<size_t>(shard.localNumel()));
      shard.scatter(wgt.data(), local.data(), rank);
      const int64_t part = 4 * width / tensor;
      const std::vector<float> slice(hidden.begin() + rank * part,
                                     hidden.begin() + (rank + 1) * part);
      const std::vector<float> out = matvec(local, slice, width, part);
      for (int64_t i = 0; i < width; ++i) summed[i] += out[i];
    }
    CHECK(summed == full);  // integers below 2^24: exact in fp32
  }
}

TEST_CASE("tensor shard: splits that do not divide are refused naming the numbers", "[unit]") {
  CHECK_THROWS_WITH(gpt2TensorShard("h.0.qkvw", {3 * 6, 6}, 4),
                    Contains("h.0.qkvw") && Contains("18 rows") && Contains("tensor 4"));
  CHECK_THROWS_WITH(gpt2TensorShard("h.0.fcprojw", {6, 10}, 4),
                    Contains("10 columns") && Contains("tensor 4"));
  CHECK_THROWS_WITH(gpt2TensorShard("h.0.mystery", {6}, 2), Contains("h.0.mystery"));
}
