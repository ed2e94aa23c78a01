// DecodeLink (runtime/serve/decode_link.h) on 2 thread ranks over gloo: what rank 0 sends, rank 1
// receives whole and in order (resets, slots, tokens, logit rows; heartbeats; stop), and a follower
// whose leader stays silent gets a TimeoutError naming rank 0 and the op it waited for.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "comm/process_group.h"
#include "comm/registry.h"
#include "comm/store/hash_store.h"
#include "core/error.h"
#include "runtime/serve/decode_link.h"
#include "tests/support/spawn_ranks.h"

using ds::runtime::serve::DecodeLink;
using ds::runtime::serve::DecodeLinkOptions;
using ds::runtime::serve::DecodeOp;

namespace {

// Runs fn(rank, group) on 2 thread ranks sharing one gloo group.
void onTwoRanks(const std::function<void(int, ds::comm::ProcessGroup&)>& fn) {
  auto store = std::make_shared<ds::comm::HashStore>();
  ds::test::runRanks(2, [&](int rank) {
    ds::comm::GroupOptions options;
    options.timeout = std::chrono::seconds(60);
    options.sharedMemory = false;
    ds::comm::ProcessGroup group(ds::comm::createBackend("gloo", store, rank, 2, options));
    fn(rank, group);
  });
}

DecodeOp forward(std::vector<int32_t> resets, std::vector<int32_t> slots,
                 std::vector<int32_t> tokens, std::vector<bool> rows) {
  DecodeOp op;
  op.kind = DecodeOp::kForward;
  op.resets = std::move(resets);
  op.slots = std::move(slots);
  op.tokens = std::move(tokens);
  op.logitRows = std::move(rows);
  return op;
}

bool same(const DecodeOp& a, const DecodeOp& b) {
  return a.kind == b.kind && a.resets == b.resets && a.slots == b.slots && a.tokens == b.tokens &&
         a.logitRows == b.logitRows;
}

}  // namespace

TEST_CASE("DecodeLink: rank 1 receives rank 0's ops whole and in order", "[unit]") {
  const std::vector<DecodeOp> sent = {
      forward({2}, {2, 2, 2}, {116, 111, 32}, {false, false, true}),  // a prefill of slot 2
      DecodeOp{},                                                     // a heartbeat
      forward({}, {0, 2}, {7, 255}, {}),                              // a decode step
      forward({0, 1}, {1}, {5}, {true}),
      DecodeOp{DecodeOp::kStop, {}, {}, {}, {}},
  };
  std::vector<DecodeOp> received;
  uint64_t counted = 0;
  onTwoRanks([&](int rank, ds::comm::ProcessGroup& group) {
    DecodeLink link(group);
    if (rank == 0) {
      for (const DecodeOp& op : sent) link.send(op);
      return;
    }
    for (;;) {
      received.push_back(link.receive());
      if (received.back().kind == DecodeOp::kStop) break;
    }
    counted = link.sent();
  });
  REQUIRE(received.size() == sent.size());
  for (size_t i = 0; i < sent.size(); ++i) {
    INFO("op " << i);
    CHECK(same(received[i], sent[i]));
  }
  CHECK(counted == sent.size());
}

TEST_CASE("DecodeLink: a follower waits for rank 0 at most followerTimeout, naming both",
          "[unit]") {
  std::string error;
  std::atomic<bool> timedOut{false};
  onTwoRanks([&](int rank, ds::comm::ProcessGroup& group) {
    DecodeLinkOptions opts;
    opts.followerTimeout = std::chrono::milliseconds(200);
    DecodeLink link(group, opts);
    if (rank == 1) {
      try {
        link.receive();
      } catch (const ds::TimeoutError& e) {
        error = e.what();
      }
      timedOut = true;
    } else {
      // Rank 0 stays silent until the follower gave up, then sends the op it waited for.
      while (!timedOut) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      link.send(DecodeOp{});
    }
    // The abandoned broadcast runs before this barrier on rank 1's queue: both ranks leave with
    // nothing in flight, so neither closes its group under the other.
    group.barrier()->wait();
  });
  CHECK_THAT(error, Catch::Contains("rank 1 waiting for op 0 (next op) from rank 0"));
  CHECK_THAT(error, Catch::Contains("nothing within 200 ms"));
}

TEST_CASE("DecodeLink: a forward whose rows disagree is refused before it is sent", "[unit]") {
  std::string error;
  DecodeOp got;
  onTwoRanks([&](int rank, ds::comm::ProcessGroup& group) {
    DecodeLink link(group);
    if (rank == 0) {
      try {
        link.send(forward({}, {0, 1}, {5}, {}));
      } catch (const ds::InternalError& e) {
        error = e.what();
      }
      link.send(DecodeOp{DecodeOp::kStop, {}, {}, {}, {}});
    } else {
      got = link.receive();  // the stop: nothing of the refused op went out
    }
  });
  CHECK_THAT(error, Catch::Contains("2 slots, 1 tokens"));
  CHECK(got.kind == DecodeOp::kStop);
}
