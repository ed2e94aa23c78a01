// The gloo reduce-scatter's output placements and its segment pipeline: the output in its own
// buffer (input must stay untouched), in place on this rank's block of the input, and overlapping
// another part of the input (the staged path); uneven blocks several ring segments long, all ops,
// on the ring (n = 2, 3) and recursive halving (n = 4, 8).
// Real libgloo over loopback TCP, ranks as threads sharing a HashStore.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "comm/gloo/gloo_backend.h"
#include "comm/process_group.h"
#include "comm/store/hash_store.h"
#include "tests/support/spawn_ranks.h"

using namespace ds;
using namespace ds::comm;

namespace {

float inputAt(int r, size_t i) { return float((i * 7 + size_t(r) * 3) % 23) - 11.f; }

float expected(ReduceOp op, int n, size_t i) {
  float acc = inputAt(0, i);
  for (int r = 1; r < n; ++r) {
    float v = inputAt(r, i);
    acc = op == ReduceOp::kMax   ? std::max(acc, v)
          : op == ReduceOp::kMin ? std::min(acc, v)
                                 : acc + v;
  }
  return op == ReduceOp::kAvg ? acc / float(n) : acc;
}

enum class Place { kSeparate, kOwnBlock, kInputStart };

}  // namespace

TEST_CASE("gloo reduce_scatter: separate, in-place and overlapping outputs, multi-segment blocks",
          "[multirank]") {
  for (int n : {2, 3, 4, 8}) {  // 4 and 8: recursive halving; 2 and 3: the ring
    // Blocks of 1.2-3.3 MB: several 1 MiB ring segments each, uneven, one empty.
    std::vector<size_t> counts;
    for (int r = 0; r < n; ++r)
      counts.push_back(r == 1 ? 0 : 300007 + size_t(r) * 70001);  // one empty block
    size_t total = 0;
    for (size_t c : counts) total += c;
    auto store = std::make_shared<HashStore>();
    std::vector<std::string> errors(n);
    ds::test::runRanks(n, [&](int r) {
      GroupOptions o;
      o.timeout = std::chrono::seconds(60);
      ProcessGroup pg(createGlooBackend(store, r, n, o));
      size_t off = 0;
      for (int i = 0; i < r; ++i) off += counts[i];
      for (Place place : {Place::kSeparate, Place::kOwnBlock, Place::kInputStart}) {
        for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin}) {
          std::vector<float> in(total), sep(counts[r], -1.f);
          for (size_t i = 0; i < total; ++i) in[i] = inputAt(r, i);
          const std::vector<float> orig = in;
          float* out = place == Place::kSeparate   ? sep.data()
                       : place == Place::kOwnBlock ? in.data() + off
                                                   : in.data();
          pg.reduceScatter(view(in.data(), total), view(out, counts[r]), counts, op)->wait();
          for (size_t i = 0; i < counts[r]; ++i) {
            float want = expected(op, n, off + i);
            if (out[i] != Approx(want).margin(1e-5)) {
              errors[r] = fmt::format("n {} place {} op {} elem {}: got {} want {}", n, int(place),
                                      int(op), i, out[i], want);
              return;
            }
          }
          if (place == Place::kSeparate && in != orig) {
            errors[r] = fmt::format("n {} op {}: the input was modified", n, int(op));
            return;
          }
        }
      }
    });
    for (int r = 0; r < n; ++r) CHECK(errors[r] == "");
  }
}
