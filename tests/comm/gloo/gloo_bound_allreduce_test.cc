// The cached 2-rank allreduce on libgloo's AllreduceRingChunked (comm/gloo/allreduce_bound.cc):
// exact results, bitwise equal on both ranks, for every eligible dtype/op and uneven counts; the
// instance follows the caller's buffer when the pointer changes; LRU eviction in lockstep; the
// ineligible cases are declined untouched; a peer that leaves mid-call is a CommError naming it.
// Real libgloo over loopback TCP, two ranks as threads, each with its own GlooLink.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "comm/gloo/allreduce_bound.h"
#include "comm/gloo/gloo_backend.h"
#include "comm/gloo/gloo_connect.h"
#include "comm/gloo/gloo_link.h"
#include "comm/process_group.h"
#include "comm/store/hash_store.h"
#include "comm/store/prefix_store.h"
#include "core/error.h"
#include "tests/support/spawn_ranks.h"

using namespace ds;
using namespace ds::comm;
using gloo_impl::BoundAllreduceCache;
using gloo_impl::GlooLink;

namespace {

// A connected 2-rank (or n-rank) link for `rank`, as GlooBackend builds it.
std::unique_ptr<GlooLink> makeLink(const std::shared_ptr<Store>& root, int rank, int n,
                                   std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  auto store = std::make_shared<PrefixStore>("bound", root);
  auto ctx = gloo_impl::connectGroup(store, rank, n, gloo_impl::createDevice("127.0.0.1"),
                                     timeout);
  std::vector<int> global(n);
  for (int r = 0; r < n; ++r) global[r] = r;
  return std::make_unique<GlooLink>(std::move(ctx), store, timeout, global);
}

template <typename T>
T value(size_t i, int r) {
  if constexpr (std::is_same_v<T, float>) return 0.37f * float((i * 31 + size_t(r) * 17) % 101) - 11.f;
  return static_cast<T>((int64_t(i) * 7919 + r * 104729) % 20011 - 10005) *
         (sizeof(T) == 8 ? T(1000003) : T(1));
}

template <typename T>
T expect(T a, T b, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return T(a + b);
    case ReduceOp::kAvg: return T(T(a + b) / T(2));
    case ReduceOp::kMax: return std::max(a, b);
    default: return std::min(a, b);
  }
}

// Runs every eligible op on `counts` through `cache`; returns this rank's results, concatenated,
// or throws on a declined call or a wrong element.
template <typename T>
std::vector<T> exercise(BoundAllreduceCache& cache, int r, DType t, std::vector<ReduceOp> ops,
                        const std::vector<size_t>& counts) {
  std::vector<T> all;
  for (ReduceOp op : ops) {
    for (size_t count : counts) {
      std::vector<T> v(count);
      for (size_t i = 0; i < count; ++i) v[i] = value<T>(i, r);
      if (!cache.run(v.data(), count, t, op)) throw std::runtime_error("eligible call declined");
      for (size_t i = 0; i < count; ++i) {
        if (v[i] != expect(value<T>(i, 0), value<T>(i, 1), op)) {
          throw std::runtime_error(fmt::format("{} {} count {}: wrong element {}", dtypeName(t),
                                               reduceOpName(op), count, i));
        }
      }
      all.insert(all.end(), v.begin(), v.end());
    }
  }
  return all;
}

const std::vector<size_t> kCounts{1, 3, 255, 256, 257, 1000, 4099, 300001};

}  // namespace

TEST_CASE("gloo bound allreduce: every eligible dtype/op, uneven counts, exact and bitwise equal",
          "[multirank]") {
  auto store = std::make_shared<HashStore>();
  std::vector<std::vector<float>> f(2);
  std::vector<std::vector<int32_t>> i32(2);
  std::vector<std::vector<int64_t>> i64(2);
  std::vector<uint64_t> builds(2);
  const std::vector<ReduceOp> all{ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin};
  ds::test::runRanks(2, [&](int r) {
    auto link = makeLink(store, r, 2);
    BoundAllreduceCache cache(*link);
    f[r] = exercise<float>(cache, r, DType::kF32, {ReduceOp::kSum, ReduceOp::kAvg}, kCounts);
    i32[r] = exercise<int32_t>(cache, r, DType::kI32, all, kCounts);
    i64[r] = exercise<int64_t>(cache, r, DType::kI64, all, kCounts);
    builds[r] = cache.builds();
  });
  CHECK(f[0] == f[1]);  // fp32: compared as values; bitwise below
  CHECK(std::memcmp(f[0].data(), f[1].data(), f[0].size() * sizeof(float)) == 0);
  CHECK(i32[0] == i32[1]);
  CHECK(i64[0] == i64[1]);
  // avg shares sum's instance; each (count, dtype, op) built once, until the 16-entry LRU evicts.
  CHECK(builds[0] == builds[1]);
  CHECK(builds[0] == kCounts.size() * (1 + 3 + 3));
}

TEST_CASE("gloo bound allreduce: follows the caller's buffer when the pointer changes",
          "[multirank]") {
  auto store = std::make_shared<HashStore>();
  std::vector<std::string> errors(2);
  std::vector<uint64_t> builds(2);
  ds::test::runRanks(2, [&](int r) {
    auto link = makeLink(store, r, 2);
    BoundAllreduceCache cache(*link);
    const size_t count = 70001;
    std::vector<float> a(count), b(count);
    for (int call = 0; call < 12; ++call) {
      // a, b, a fresh heap block, a, ... and a different offset into b on rank 1 only: the two
      // ranks' pointers change at different calls.
      std::vector<float> fresh(count + 1);
      float* p = call % 3 == 0 ? a.data() : call % 3 == 1 ? b.data() : fresh.data();
      if (r == 1 && call % 4 == 3) p = fresh.data() + 1;
      for (size_t i = 0; i < count; ++i) p[i] = float(call) + value<float>(i, r);
      if (!cache.run(p, count, DType::kF32, ReduceOp::kSum)) throw std::runtime_error("declined");
      for (size_t i = 0; i < count; ++i) {
        float want = (float(call) + value<float>(i, 0)) + (float(call) + value<float>(i, 1));
        if (p[i] != want && errors[r].empty()) {
          errors[r] = fmt::format("call {} element {}: {} != {}", call, i, p[i], want);
        }
      }
    }
    builds[r] = cache.builds();
  });
  CHECK(errors[0] == "");
  CHECK(errors[1] == "");
  CHECK(builds[0] == 1);
  CHECK(builds[1] == 1);
}

TEST_CASE("gloo bound allreduce: LRU eviction stays in lockstep", "[multirank]") {
  auto store = std::make_shared<HashStore>();
  std::vector<uint64_t> builds(2), entries(2), rebuilt(2);
  ds::test::runRanks(2, [&](int r) {
    auto link = makeLink(store, r, 2);
    BoundAllreduceCache cache(*link);
    const size_t shapes = BoundAllreduceCache::kMaxEntries + 4;
    for (int round = 0; round < 2; ++round) {
      for (size_t s = 0; s < shapes; ++s) {
        std::vector<int64_t> v(100 + s, int64_t(r + 1) * int64_t(s + 1));
        if (!cache.run(v.data(), v.size(), DType::kI64, ReduceOp::kSum)) {
          throw std::runtime_error("declined");
        }
        for (int64_t x : v) {
          if (x != 3 * int64_t(s + 1)) throw std::runtime_error("wrong sum");
        }
      }
    }
    builds[r] = cache.builds();
    entries[r] = cache.entries();
    // The most recent shape is still cached: no new build.
    std::vector<int64_t> v(100 + shapes - 1, 1);
    cache.run(v.data(), v.size(), DType::kI64, ReduceOp::kSum);
    rebuilt[r] = cache.builds() - builds[r];
    if (v[0] != 2) throw std::runtime_error("wrong sum after eviction");
  });
  // Cycling 20 shapes through 16 entries: every call misses, on both ranks alike.
  CHECK(builds[0] == 2 * (BoundAllreduceCache::kMaxEntries + 4));
  CHECK(builds[1] == builds[0]);
  CHECK(entries[0] == BoundAllreduceCache::kMaxEntries);
  CHECK(entries[1] == entries[0]);
  CHECK(rebuilt[0] == 0);
  CHECK(rebuilt[1] == 0);
}

TEST_CASE("gloo bound allreduce: ineligible calls are declined and the backend falls back",
          "[multirank]") {
  const size_t big = gloo_impl::boundAllreduceBytes() / 4 + 1;
  CHECK_FALSE(BoundAllreduceCache::eligible(2, 1000, DType::kF16, ReduceOp::kSum));
  CHECK_FALSE(BoundAllreduceCache::eligible(2, 1000, DType::kBF16, ReduceOp::kSum));
  CHECK_FALSE(BoundAllreduceCache::eligible(2, 1000, DType::kF32, ReduceOp::kMax));
  CHECK_FALSE(BoundAllreduceCache::eligible(2, 1000, DType::kF32, ReduceOp::kMin));
  CHECK_FALSE(BoundAllreduceCache::eligible(2, big, DType::kF32, ReduceOp::kSum));
  CHECK_FALSE(BoundAllreduceCache::eligible(2, 0, DType::kF32, ReduceOp::kSum));
  CHECK_FALSE(BoundAllreduceCache::eligible(3, 1000, DType::kF32, ReduceOp::kSum));
  CHECK_FALSE(BoundAllreduceCache::eligible(1, 1000, DType::kF32, ReduceOp::kSum));
  CHECK(BoundAllreduceCache::eligible(2, 1000, DType::kF32, ReduceOp::kAvg));
  CHECK(BoundAllreduceCache::eligible(2, 1000, DType::kI32, ReduceOp::kMax));

  // Through the backend: the bound and fallback paths interleave on one group, results exact.
  auto store = std::make_shared<HashStore>();
  std::vector<std::string> errors(2);
  ds::test::runRanks(2, [&](int r) {
    GroupOptions o;
    o.timeout = std::chrono::seconds(60);
    ProcessGroup pg(createGlooBackend(store, r, 2, o));
    for (int iter = 0; iter < 3; ++iter) {
      std::vector<float> f(5000, float(r + 1));  // bound
      std::vector<uint16_t> h(5000, r == 0 ? 0x3c00 : 0x4000);  // fp16 1.0 + 2.0: fallback
      std::vector<float> m(5000, r == 0 ? 5.f : -1.f);  // fp32 max: fallback
      std::vector<float> l(big, 1.f);  // above the threshold: fallback
      pg.allreduce(view(f.data(), f.size()))->wait();
      pg.allreduce(BufferView{h.data(), h.size(), DType::kF16, Device::kCpu})->wait();
      pg.allreduce(view(m.data(), m.size()), ReduceOp::kMax)->wait();
      pg.allreduce(view(l.data(), l.size()))->wait();
      if (f[4999] != 3.f) errors[r] += "fp32 sum; ";
      if (h[4999] != 0x4200) errors[r] += "fp16 sum; ";  // 3.0
      if (m[0] != 5.f) errors[r] += "fp32 max; ";
      if (l[big - 1] != 2.f) errors[r] += "large sum; ";
    }
  });
  CHECK(errors[0] == "");
  CHECK(errors[1] == "");
}

TEST_CASE("gloo bound allreduce: a peer that leaves is a CommError naming it", "[multirank]") {
  auto store = std::make_shared<HashStore>();
  std::string seen;
  ds::test::runRanks(2, [&](int r) {
    auto link = makeLink(store, r, 2, std::chrono::seconds(20));
    BoundAllreduceCache cache(*link);
    std::vector<float> v(100000, 1.f);
    cache.run(v.data(), v.size(), DType::kF32, ReduceOp::kSum);  // both: built and run once
    if (r == 1) {
      link->closeConnections();
      return;
    }
    try {
      cache.run(v.data(), v.size(), DType::kF32, ReduceOp::kSum);
      seen = "no error";
    } catch (const CommError& e) {
      seen = e.what();
    }
  });
  CHECK_THAT(seen, Catch::Contains("peer rank 1"));
  CHECK_THAT(seen, Catch::Contains("allreduce"));
}
