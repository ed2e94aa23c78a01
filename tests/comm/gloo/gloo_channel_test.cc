// The gloo backend's receive-channel algorithms (comm/gloo/recv_channel.cc): the one-round direct
// reduce_scatter (n = 2, 3, 4, 5, 8; uneven and empty blocks, all ops, fp32/int32/bf16) and the
// 2-rank pair allreduce (bitwise identical on both ranks, equal to op(rank 0's, rank 1's)), both
// with messages large enough to travel as several pieces (the last shorter), each
// over repeated and interleaved shapes with inputs that change per call, so a reused receive
// region that delivered stale or misrouted data fails the check; and the fallback once a
// group's channel cache is full. Real libgloo over loopback TCP, ranks as threads (HashStore).
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "comm/gloo/gloo_backend.h"
#include "comm/process_group.h"
#include "comm/store/hash_store.h"
#include "tests/support/spawn_ranks.h"

using namespace ds;
using namespace ds::comm;

namespace {

GroupOptions opts() {
  GroupOptions o;
  o.timeout = std::chrono::seconds(60);
  return o;
}

// Small integers: every sum, and every fp32-accumulated bf16 sum, is exact.
int inputAt(int r, size_t i, int call) {
  return int((i * 7 + size_t(r) * 3 + size_t(call) * 5) % 23) - 11;
}

double reference(ReduceOp op, int n, size_t i, int call) {
  double acc = inputAt(0, i, call);
  for (int r = 1; r < n; ++r) {
    double v = inputAt(r, i, call);
    acc = op == ReduceOp::kMax   ? std::max(acc, v)
          : op == ReduceOp::kMin ? std::min(acc, v)
                                 : acc + v;
  }
  return op == ReduceOp::kAvg ? acc / n : acc;
}

template <typename T>
T fromInt(int v) {
  if constexpr (std::is_same_v<T, bf16>) {
    return floatToBf16(float(v));
  } else {
    return static_cast<T>(v);
  }
}

template <typename T>
double toDouble(T v) {
  if constexpr (std::is_same_v<T, bf16>) {
    return bf16ToFloat(v);
  } else {
    return static_cast<double>(v);
  }
}

template <typename T>
DType dtypeOf() {
  if constexpr (std::is_same_v<T, bf16>) return DType::kBF16;
  if constexpr (std::is_same_v<T, int32_t>) return DType::kI32;
  return DType::kF32;
}

template <typename T>
BufferView tview(T* p, size_t n) {
  return {p, n, dtypeOf<T>(), Device::kCpu};
}

// Expected value as stored in T: avg of integers truncates toward zero; bf16 rounds once.
template <typename T>
double expectedAs(ReduceOp op, int n, size_t i, int call) {
  double want = reference(op, n, i, call);
  if constexpr (std::is_same_v<T, int32_t>) {
    if (op == ReduceOp::kAvg) {
      double sum = 0;
      for (int r = 0; r < n; ++r) sum += inputAt(r, i, call);
      return double(int32_t(sum) / n);
    }
  } else if constexpr (std::is_same_v<T, bf16>) {
    return bf16ToFloat(floatToBf16(float(want)));
  }
  return want;
}

// Shapes for world n: uneven with an empty block, all empty but one, even, and all empty; for
// n <= 3 also large uneven blocks, sent as several pieces (messagePieces) of which the last
// is shorter, a different number of pieces from each peer.
std::vector<std::vector<size_t>> shapesFor(int n) {
  std::vector<size_t> uneven, one(n, 0), even(n, 1000), none(n, 0), pieces;
  for (int r = 0; r < n; ++r) uneven.push_back(r == n / 2 ? 0 : 301 + size_t(r) * 97);
  one[n - 1] = 4099;
  for (int r = 0; r < n; ++r) pieces.push_back(70001 + size_t(r) * 60002);
  if (n <= 3) return {uneven, one, even, none, pieces};
  return {uneven, one, even, none};
}

template <typename T>
std::string reduceScatterRounds(ProcessGroup& pg, int n, int r) {
  auto shapes = shapesFor(n);
  for (int call = 0; call < 12; ++call) {  // each shape three times, interleaved
    const auto& counts = shapes[call % shapes.size()];
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin}) {
      size_t total = 0, off = 0;
      for (int p = 0; p < n; ++p) {
        if (p < r) off += counts[p];
        total += counts[p];
      }
      std::vector<T> in(total), out(counts[r], fromInt<T>(99));
      for (size_t i = 0; i < total; ++i) in[i] = fromInt<T>(inputAt(r, i, call));
      std::vector<T> orig = in;
      pg.reduceScatter(tview(in.data(), total), tview(out.data(), counts[r]), counts, op)->wait();
      for (size_t i = 0; i < counts[r]; ++i) {
        double want = expectedAs<T>(op, n, off + i, call);
        if (toDouble(out[i]) != Approx(want).margin(1e-5)) {
          return fmt::format("n {} call {} op {} elem {}: got {} want {}", n, call, int(op), i,
                             toDouble(out[i]), want);
        }
      }
      // (memcmp must not see the null data() of an empty vector, even for 0 bytes)
      if (total != 0 && std::memcmp(in.data(), orig.data(), total * sizeof(T)) != 0) {
        return fmt::format("n {} call {}: the input was modified", n, call);
      }
    }
  }
  return "";
}

}  // namespace

TEST_CASE("gloo direct reduce_scatter: uneven and empty blocks, repeated shapes, n = 2..8",
          "[multirank]") {
  for (int n : {2, 3, 4, 5, 8}) {
    auto store = std::make_shared<HashStore>();
    std::vector<std::string> errors(n);
    ds::test::runRanks(n, [&](int r) {
      ProcessGroup pg(createGlooBackend(store, r, n, opts()));
      errors[r] = reduceScatterRounds<float>(pg, n, r);
      if (errors[r].empty()) errors[r] = reduceScatterRounds<int32_t>(pg, n, r);
      if (errors[r].empty()) errors[r] = reduceScatterRounds<bf16>(pg, n, r);
    });
    for (int r = 0; r < n; ++r) CHECK(errors[r] == "");
  }
}

TEST_CASE("gloo 2-rank allreduce: one exchange, bitwise identical, op(rank 0, rank 1)",
          "[multirank]") {
  // Non-integer values, so the sum's rounding shows: both ranks must hold exactly a0 + a1.
  auto value = [](int r, size_t i, int call) {
    return 0.1f * float((i * 13 + size_t(r) * 7 + size_t(call) * 3) % 97) - 3.3f;
  };
  auto store = std::make_shared<HashStore>();
  std::vector<std::string> errors(2);
  std::vector<std::vector<float>> last(2);
  ds::test::runRanks(2, [&](int r) {
    ProcessGroup pg(createGlooBackend(store, r, 2, opts()));
    // 1 MiB (whole pieces) and 300001 (a shorter last piece) among them; 3 comes back.
    const size_t sizes[] = {1, 3, 1000, 262144, 3, 300001};
    for (int call = 0; call < 18; ++call) {
      const size_t count = sizes[call % 6];
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin}) {
        std::vector<float> v(count);
        for (size_t i = 0; i < count; ++i) v[i] = value(r, i, call);
        pg.allreduce(view(v.data(), count), op)->wait();
        for (size_t i = 0; i < count && errors[r].empty(); ++i) {
          float a = value(0, i, call), b = value(1, i, call);
          float want = op == ReduceOp::kMax   ? std::max(a, b)
                       : op == ReduceOp::kMin ? std::min(a, b)
                       : op == ReduceOp::kSum ? a + b
                                              : (a + b) / 2.f;
          if (std::memcmp(&v[i], &want, 4) != 0) {
            errors[r] =
                fmt::format("call {} op {} elem {}: got {} want {}", call, int(op), i, v[i], want);
          }
        }
        if (call == 15 && op == ReduceOp::kSum) last[r] = v;
      }
    }
  });
  CHECK(errors[0] == "");
  CHECK(errors[1] == "");
  REQUIRE(last[0].size() == 262144);
  CHECK(std::memcmp(last[0].data(), last[1].data(), last[0].size() * 4) == 0);
}

TEST_CASE("gloo receive channels: a full cache falls back to the uncached algorithms",
          "[multirank]") {
  // 80 distinct shapes (the cache holds 64) per collective, then the first ones again.
  for (int n : {2, 3}) {
    auto store = std::make_shared<HashStore>();
    std::vector<std::string> errors(n);
    ds::test::runRanks(n, [&](int r) {
      ProcessGroup pg(createGlooBackend(store, r, n, opts()));
      for (int pass = 0; pass < 2 && errors[r].empty(); ++pass) {
        for (int k = 0; k < (pass == 0 ? 80 : 5) && errors[r].empty(); ++k) {
          const int call = pass * 100 + k;
          const size_t count = 10 + size_t(k);
          std::vector<float> v(count);
          for (size_t i = 0; i < count; ++i) v[i] = float(inputAt(r, i, call));
          pg.allreduce(view(v.data(), count))->wait();
          std::vector<size_t> counts(n, count);
          counts[0] += 1;
          size_t total = count * n + 1, off = r == 0 ? 0 : count * r + 1;
          std::vector<float> in(total), out(counts[r]);
          for (size_t i = 0; i < total; ++i) in[i] = float(inputAt(r, i, call));
          pg.reduceScatter(view(in.data(), total), view(out.data(), counts[r]), counts,
                           ReduceOp::kSum)
              ->wait();
          for (size_t i = 0; i < count && errors[r].empty(); ++i) {
            if (v[i] != float(reference(ReduceOp::kSum, n, i, call))) {
              errors[r] = fmt::format("allreduce pass {} shape {} elem {}", pass, k, i);
            }
          }
          for (size_t i = 0; i < counts[r] && errors[r].empty(); ++i) {
            if (out[i] != float(reference(ReduceOp::kSum, n, off + i, call))) {
              errors[r] = fmt::format("reduce_scatter pass {} shape {} elem {}", pass, k, i);
            }
          }
        }
      }
    });
    for (int r = 0; r < n; ++r) CHECK(errors[r] == "");
  }
}
