// ParamSwap (zero/param_swap.h): byte ranges written at any offset and length (partial 1 MiB
// blocks read, patched and written back; whole ones written from a ring of bounce buffers with
// several in flight) read back exactly, a write is complete when it returns (the next read sees
// it), and a read-ahead submitted before a write never returns the old bytes.
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <vector>

#include "tests/support/spawn_ranks.h"
#include "zero/param_swap.h"

using ds::test::TempDir;
using ds::zero::ParamSwap;

namespace {

std::vector<uint8_t> randomBytes(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> out(count);
  for (auto& b : out) b = static_cast<uint8_t>(rng());
  return out;
}

}  // namespace

TEST_CASE("param swap: writes at any offset and length read back exactly", "[unit]") {
  TempDir dir;
  constexpr size_t kBytes = (size_t(9) << 20) + 12345;  // 9 MiB and a partial block
  ParamSwap swap(dir.path(), 0, kBytes);
  std::vector<uint8_t> model(kBytes, 0);
  struct Range {
    size_t offset, count;
  };
  // Inside one block, across two, many whole blocks with ragged ends, aligned whole blocks,
  // the file's tail, and overlapping rewrites.
  const Range ranges[] = {{100, 7},
                          {(1 << 20) - 3, 10},
                          {12345, (size_t(6) << 20) + 777},
                          {size_t(2) << 20, size_t(4) << 20},
                          {kBytes - 5000, 5000},
                          {3000, (size_t(5) << 20)},
                          {0, kBytes}};
  uint32_t seed = 1;
  for (const Range& r : ranges) {
    INFO("write [" << r.offset << ", +" << r.count << ")");
    const auto bytes = randomBytes(r.count, seed++);
    swap.write(r.offset, r.count, bytes.data());
    std::copy(bytes.begin(), bytes.end(), model.begin() + static_cast<long>(r.offset));
    std::vector<uint8_t> all(kBytes);
    swap.read(0, kBytes, all.data());
    CHECK(all == model);
    std::vector<uint8_t> part(r.count);
    swap.read(r.offset, r.count, part.data());
    CHECK(part == bytes);
  }
}

TEST_CASE("param swap: a read-ahead from before a write is dropped, not returned stale", "[unit]") {
  TempDir dir;
  constexpr size_t kBytes = size_t(3) << 20;
  ParamSwap swap(dir.path(), 0, kBytes);
  const auto first = randomBytes(kBytes, 7), second = randomBytes(kBytes, 8);
  swap.write(0, kBytes, first.data());
  swap.readAhead(42, 4096, size_t(2) << 20);
  swap.write(0, kBytes, second.data());
  std::vector<uint8_t> got(size_t(2) << 20);
  CHECK_FALSE(swap.take(42, 4096, got.size(), got.data()));  // dropped by the write
  swap.readAhead(43, 4096, got.size());
  REQUIRE(swap.take(43, 4096, got.size(), got.data()));
  CHECK(std::equal(got.begin(), got.end(), second.begin() + 4096));
}
