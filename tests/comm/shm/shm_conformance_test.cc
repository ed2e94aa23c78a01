// The shared-memory collectives against the gloo TCP path, in real processes (2-4 ranks over a
// TcpStore): each rank runs every collective on both groups with the same inputs and compares
// the bytes. fp32 and fp16/bf16 with non-integer values at 2 ranks (both paths reduce in rank
// order there: bitwise equal); integer-valued inputs at 3-4 ranks (gloo's ring order differs,
// exact values make any order agree). Sizes 0, 1, odd, and larger than the whole segment (a
// 64 KiB slot, so every size above 8192 fp32 elements pipelines through several chunks; at the
// default single-copy threshold of 256 KiB, 70001 fp32 elements take the CMA path where this
// host allows it: shm_single_copy_test.cc covers that path on purpose).
#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <cstring>
#include <random>

#include "comm/gloo/gloo_backend.h"
#include "comm/process_group.h"
#include "comm/shm/hier_backend.h"
#include "comm/shm/shm_backend.h"
#include "comm/store/prefix_store.h"
#include "comm/store/tcp_store.h"
#include "core/dtype.h"
#include "tests/comm/conformance_procs.h"
#include "tests/comm/shm/shm_compare.h"
#include "tests/support/spawn_ranks.h"

using namespace ds;
using namespace ds::comm;
using namespace ds::test::conformance;
using namespace ds::test::shm;

namespace {

std::string runSuite(ProcessGroup& shm, ProcessGroup& tcp) {
  const bool exact = shm.size() > 2;
  std::string errs;
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16, DType::kI32}) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{1031}, size_t{70001}}) {
      for (const char* what : {"allreduce", "reduce_scatter", "allgather", "broadcast", "reduce"}) {
        std::vector<ReduceOp> ops{ReduceOp::kSum};
        if (std::string(what) == "allreduce")
          ops = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax};
        for (ReduceOp op : ops) {
          // Averages of exact inputs at 3 ranks are not exact: compare only where order agrees.
          if (op == ReduceOp::kAvg && exact && t != DType::kI32) continue;
          errs += compareOne(shm, tcp, what, t, count, op, exact || t == DType::kI32);
        }
      }
    }
  }
  errs += compareOne(shm, tcp, "barrier", DType::kF32, 0, ReduceOp::kSum, true);
  return errs;
}

// The ordering probe of the two "issue order" cases: three rounds of a 16 MiB sum of r + 1
// (`sum` everywhere) followed, before either is waited for, by a max over its first 4 floats
// small enough for the other transport; waiting for the max alone must find every element
// summed, and the first 4 must be `sum` (had the max overtaken the sum, they would not be).
std::string sumThenMaxInOrder(ProcessGroup& group, int r, float sum) {
  std::string errs;
  for (int round = 0; round < 3; ++round) {
    std::vector<float> x(size_t(4) << 20, float(r + 1));
    auto big = group.allreduce(view(x.data(), x.size()), ReduceOp::kSum);
    auto small = group.allreduce(view(x.data(), 4), ReduceOp::kMax);
    small->wait();
    size_t notDone = 0;
    for (float v : x) notDone += v != sum ? 1 : 0;
    big->wait();
    if (notDone > 0)
      errs += fmt::format(
          "round {}: {} elements not summed when the later small collective "
          "completed\n",
          round, notDone);
    for (int i = 0; i < 4; ++i)
      if (x[size_t(i)] != sum)
        errs += fmt::format("round {}: x[{}] = {} (expected {})\n", round, i, x[size_t(i)], sum);
  }
  return errs;
}

}  // namespace

TEST_CASE("shm: every collective equals the gloo TCP path, 2-4 processes", "[multiproc]") {
  for (int n = 2; n <= 4; ++n) {
    INFO("world " << n);
    int port = ds::test::freePort();
    auto res = forkRanks(
        n,
        [&](int r) -> std::string {
          auto store = procStore(r, port);
          ShmOptions so;
          so.slotBytes = 64 << 10;  // 32 KiB halves: the larger sizes take many chunks
          so.timeout = std::chrono::seconds(60);
          auto tcpStore = std::make_shared<PrefixStore>("tcp", store);
          ProcessGroup tcp(createGlooBackend(tcpStore, r, n, tcpOptions()));
          auto glooForShm =
              createGlooBackend(std::make_shared<PrefixStore>("shm", store), r, n, tcpOptions());
          auto wrapped = wrapWithShm(std::move(glooForShm), store, so);
          if (!isShmBackend(*wrapped)) return "the group of one host was not put on shm";
          ProcessGroup shm(std::move(wrapped));
          return runSuite(shm, tcp);
        },
        std::chrono::seconds(240));
    CHECK(failures(res) == "");
  }
}

// Hierarchical collectives (comm/shm/hier_backend.h): the launcher's CROSS_RANK puts ranks on
// "hosts"; every collective of the hierarchical group equals the flat gloo group's bytes
// (integer-valued inputs: any reduction order gives the same sums). Layouts: 2+1 ranks, 2+2
// consecutive, and 2+2 interleaved (reduce_scatter/allgather then stay flat).
TEST_CASE("shm: hierarchical collectives across hosts equal the flat gloo path", "[multiproc]") {
  struct Layout {
    int ranks;
    int (*host)(int);
  };
  const Layout layouts[] = {{3, [](int r) { return r / 2; }},
                            {4, [](int r) { return r / 2; }},
                            {4, [](int r) { return r % 2; }}};
  for (const Layout& l : layouts) {
    const int n = l.ranks;
    INFO("world " << n << ", host of rank 1: " << l.host(1));
    int port = ds::test::freePort();
    auto res = forkRanks(
        n,
        [&](int r) -> std::string {
          ::setenv("CROSS_RANK", std::to_string(l.host(r)).c_str(), 1);
          ::setenv("DS_COMM_HIER_MIN_BYTES", "0", 1);
          auto store = procStore(r, port);
          ShmOptions so;
          so.slotBytes = 64 << 10;
          so.timeout = std::chrono::seconds(60);
          auto tcpStore = std::make_shared<PrefixStore>("tcp", store);
          ProcessGroup tcp(createGlooBackend(tcpStore, r, n, tcpOptions()));
          auto glooForHier =
              createGlooBackend(std::make_shared<PrefixStore>("hier", store), r, n, tcpOptions());
          auto wrapped = wrapWithShm(std::move(glooForHier), store, so);
          if (!isHierBackend(*wrapped)) return "the group across hosts is not hierarchical";
          ProcessGroup hier(std::move(wrapped));
          std::string errs = runSuite(hier, tcp);
          // A subgroup of a hierarchical group works too (here: ranks 0 and n-1, two hosts).
          auto subHier = hier.newSubgroup({0, n - 1});
          auto subTcp = tcp.newSubgroup({0, n - 1});
          if ((subHier == nullptr) != (subTcp == nullptr)) return errs + "subgroup membership";
          if (subHier) {
            std::vector<float> a(5000, float(r + 1)), b = a;
            subHier->allreduce(view(a.data(), a.size()))->wait();
            subTcp->allreduce(view(b.data(), b.size()))->wait();
            if (a != b) errs += "subgroup allreduce differs\n";
          }
          return errs;
        },
        std::chrono::seconds(300));
    CHECK(failures(res) == "");
  }
}

TEST_CASE("shm: DS_COMM_HIERARCHICAL=0 keeps a group across hosts flat", "[multiproc]") {
  int port = ds::test::freePort();
  auto res = forkRanks(
      4,
      [&](int r) -> std::string {
        ::setenv("CROSS_RANK", std::to_string(r / 2).c_str(), 1);
        ::setenv("DS_COMM_HIERARCHICAL", "0", 1);
        auto store = procStore(r, port);
        ShmOptions so;
        so.timeout = std::chrono::seconds(60);
        auto be = wrapWithShm(createGlooBackend(store, r, 4, tcpOptions()), store, so);
        if (isHierBackend(*be) || isShmBackend(*be)) return "not the flat gloo group";
        return "";
      },
      std::chrono::seconds(120));
  CHECK(failures(res) == "");
}

// With minBytes > 0 (the mpi backend's mode: small collectives stay on the inner transport) a
// group mixes two transports; issue order must hold across them. Rank r's 16 MiB buffer of r + 1
// is summed on shm (3 everywhere), then its first 4 elements are max-reduced on the inner
// backend, issued before the first is waited for: in order, the max sees the sums (3); had it
// overtaken the large sum, it would see max(1, 2) = 2 and the sum would then make it 4. Waiting
// for the second alone must also mean the first is done (every element 3). A subgroup split
// queued behind both, and a barrier (inner in this mode), keep the order too.
TEST_CASE("shm: issue order holds across the shm and the inner transport", "[multiproc]") {
  const int n = 2;
  int port = ds::test::freePort();
  auto res = forkRanks(
      n,
      [&](int r) -> std::string {
        auto store = procStore(r, port);
        ShmOptions so;
        so.timeout = std::chrono::seconds(60);
        so.minBytes = 1 << 20;
        auto gloo =
            createGlooBackend(std::make_shared<PrefixStore>("g", store), r, n, tcpOptions());
        auto wrapped = wrapWithShm(std::move(gloo), store, so);
        if (!isShmBackend(*wrapped)) return "the group of one host was not put on shm";
        ProcessGroup group(std::move(wrapped));
        std::string errs = sumThenMaxInOrder(group, r, 3.f);
        std::vector<float> y(size_t(4) << 20, float(r + 1));
        auto queued = group.allreduce(view(y.data(), y.size()), ReduceOp::kSum);
        group.barrier()->wait();
        auto sub = group.newSubgroup({0, 1});
        queued->wait();
        std::vector<float> z(8, float(r + 1));
        sub->allreduce(view(z.data(), z.size()))->wait();
        if (y.back() != 3.f || z[0] != 3.f) errs += "barrier or subgroup after a queued sum\n";
        return errs;
      },
      std::chrono::seconds(120));
  CHECK(failures(res) == "");
}

// The same across hosts: below DS_COMM_HIER_MIN_BYTES collectives take the flat backend while
// larger ones are queued for the hierarchical path. 4 ranks on 2 simulated hosts: the sum of
// r + 1 is 10, the max over the sums 10; had the small max overtaken the sum, 4 then 16.
TEST_CASE("shm: issue order holds across the hierarchical and the flat path", "[multiproc]") {
  const int n = 4;
  int port = ds::test::freePort();
  auto res = forkRanks(
      n,
      [&](int r) -> std::string {
        ::setenv("CROSS_RANK", std::to_string(r / 2).c_str(), 1);
        ::setenv("DS_COMM_HIER_MIN_BYTES", "1048576", 1);
        auto store = procStore(r, port);
        ShmOptions so;
        so.timeout = std::chrono::seconds(60);
        auto gloo =
            createGlooBackend(std::make_shared<PrefixStore>("h", store), r, n, tcpOptions());
        auto wrapped = wrapWithShm(std::move(gloo), store, so);
        if (!isHierBackend(*wrapped)) return "the group across hosts is not hierarchical";
        ProcessGroup group(std::move(wrapped));
        std::string errs = sumThenMaxInOrder(group, r, 10.f);
        std::vector<float> y(size_t(4) << 20, float(r + 1));
        auto queued = group.allreduce(view(y.data(), y.size()), ReduceOp::kSum);
        group.barrier()->wait();
        const bool doneAtBarrier = y.back() == 10.f;
        queued->wait();
        if (!doneAtBarrier) errs += "a barrier returned before the sum issued before it\n";
        return errs;
      },
      std::chrono::seconds(180));
  CHECK(failures(res) == "");
}
