// Registered host buffers (comm/shared_host_buffer.h) and the single-copy collectives that read
// and write a peer's such buffer through a mapping (comm/shm/peer_maps.h): the registry in one
// process; then, in real processes, every collective on registered buffers bitwise equal to the
// gloo TCP path at 2-4 ranks (every rank registered, or only some: mapped and CMA peers mixed in
// one collective), the mappings actually made (and none with DS_COMM_SHM_MAP=0), a peer that
// frees and reallocates its buffer between collectives (the stale mapping dropped, the new buffer
// used), a peer SIGKILLed mid-allreduce (the others fail naming it), CMA refused (a seccomp
// filter, as Docker's default profile or Yama's ptrace_scope 1 would): registered buffers still
// single-copy through the mappings, others on the copy path, and the resident-set cost the
// layer reports.
#include <catch2/catch.hpp>

#include <csignal>
#include <cstring>
#include <memory>
#include <optional>

#include "comm/gloo/gloo_backend.h"
#include "comm/process_group.h"
#include "comm/shared_host_buffer.h"
#include "comm/shm/shm_backend.h"
#include "comm/store/prefix_store.h"
#include "tests/comm/conformance_procs.h"
#include "tests/comm/shm/shm_compare.h"
#include "tests/support/skip.h"
#include "tests/support/spawn_ranks.h"

using namespace ds;
using namespace ds::comm;
using namespace ds::test::conformance;
using namespace ds::test::shm;

namespace {

// A copy of `init` in a registered buffer (share) or in a plain vector.
class Mem {
 public:
  Mem(const std::vector<char>& init, bool share) {
    if (share) {
      shared_.emplace(init.size());
      if (!init.empty()) std::memcpy(shared_->data(), init.data(), init.size());
    } else {
      private_ = init;
    }
  }
  char* data() { return shared_ ? shared_->data() : private_.data(); }
  size_t size() const { return shared_ ? shared_->bytes() : private_.size(); }
  bool shared() const { return shared_ && shared_->shared(); }
  std::vector<char> bytes() {
    return std::vector<char>(data(), data() + static_cast<std::ptrdiff_t>(size()));
  }

 private:
  std::optional<SharedHostBuffer> shared_;
  std::vector<char> private_;
};

BufferView view(Mem& m, size_t count, DType t) { return {m.data(), count, t, Device::kCpu}; }

struct Groups {
  std::unique_ptr<ProcessGroup> shm;
  std::unique_ptr<ProcessGroup> tcp;
  const Backend* shmBackend = nullptr;  // owned by shm
};

Groups makeGroups(int rank, int size, int port, bool mapPeers, bool requireCma = true) {
  auto store = procStore(rank, port);
  Groups g;
  g.tcp = std::make_unique<ProcessGroup>(
      createGlooBackend(std::make_shared<PrefixStore>("tcp", store), rank, size, tcpOptions()));
  ShmOptions so;
  so.slotBytes = 64 << 10;
  so.timeout = std::chrono::seconds(60);
  so.cmaMinBytes = 4096;
  so.mapPeers = mapPeers;
  auto wrapped = wrapWithShm(
      createGlooBackend(std::make_shared<PrefixStore>("shm", store), rank, size, tcpOptions()),
      store, so);
  if (isShmSingleCopy(*wrapped) != requireCma)
    throw std::runtime_error(requireCma ? "the CMA path is off" : "the CMA path is on");
  g.shmBackend = wrapped.get();
  g.shm = std::make_unique<ProcessGroup>(std::move(wrapped));
  return g;
}

// One collective with the shm side's published buffer registered (share) or not, against the
// TCP group on plain vectors; "" when every output byte is the same.
std::string compareMapped(Groups& g, const std::string& what, DType t, size_t count, ReduceOp op,
                          bool exact, bool share) {
  ProcessGroup& shm = *g.shm;
  ProcessGroup& tcp = *g.tcp;
  const int n = shm.size(), r = shm.rank();
  const auto me = static_cast<size_t>(r);
  const size_t es = dtypeSize(t);
  std::vector<char> want = input(t, count, r, exact), wantOut;
  Mem got(want, share);
  std::vector<char> gotOut;
  if (what == "allreduce") {
    shm.allreduce(view(got, count, t), op)->wait();
    tcp.allreduce(bv(want, count, t), op)->wait();
  } else if (what == "reduce") {
    shm.reduce(view(got, count, t), n - 1, op)->wait();
    tcp.reduce(bv(want, count, t), n - 1, op)->wait();
  } else if (what == "broadcast") {
    shm.broadcast(view(got, count, t), 1 % n)->wait();
    tcp.broadcast(bv(want, count, t), 1 % n)->wait();
  } else if (what == "reduce_scatter") {
    auto counts = evenCounts(count, n);
    gotOut.assign(counts[me] * es, 0);
    wantOut = gotOut;
    shm.reduceScatter(view(got, count, t), bv(gotOut, counts[me], t), counts, op)->wait();
    tcp.reduceScatter(bv(want, count, t), bv(wantOut, counts[me], t), counts, op)->wait();
  } else if (what == "allgather") {
    auto counts = evenCounts(count * static_cast<size_t>(n), n);
    std::vector<char> block = input(t, counts[me], r, exact);
    Mem mine(block, share);
    gotOut.assign(count * static_cast<size_t>(n) * es, 0);
    wantOut = gotOut;
    shm.allgather(view(mine, counts[me], t), bv(gotOut, gotOut.size() / es, t), counts)->wait();
    tcp.allgather(bv(block, counts[me], t), bv(wantOut, wantOut.size() / es, t), counts)->wait();
  }
  if (got.bytes() == want && gotOut == wantOut) return "";
  return fmt::format("rank {} of {}: {} {} count {} op {} ({}) differs from gloo TCP\n", r, n, what,
                     dtypeName(t), count, reduceOpName(op), share ? "registered" : "private");
}

// Every collective over sizes below and above a chunk; share(rank) says who registers.
std::string suite(Groups& g, bool share) {
  const bool exactAll = g.shm->size() > 2;
  std::string errs;
  for (DType t : {DType::kF32, DType::kBF16, DType::kI32}) {
    const bool exact = exactAll || t == DType::kI32;
    for (size_t count : {size_t{4099}, size_t{70001}, size_t{300007}}) {
      for (const char* what : {"allreduce", "reduce_scatter", "allgather", "broadcast", "reduce"}) {
        std::vector<ReduceOp> ops{ReduceOp::kSum};
        if (std::string(what) == "allreduce") ops = {ReduceOp::kSum, ReduceOp::kMax};
        for (ReduceOp op : ops) errs += compareMapped(g, what, t, count, op, exact, share);
      }
    }
  }
  return errs;
}

}  // namespace

TEST_CASE("shared host buffer: zeroed, registered by address, released", "[unit]") {
  const uint64_t releasedBefore = sharedRegionsReleased();
  std::optional<SharedHostBuffer> a(std::in_place, 10000);
  REQUIRE(a->shared());
  CHECK(a->bytes() == 10000);
  for (size_t i = 0; i < a->bytes(); ++i) REQUIRE(a->data()[i] == 0);
  auto at = findSharedRegion(a->data() + 5000);
  REQUIRE(at.has_value());
  CHECK(at->offset == 5000);
  CHECK(at->bytes >= 10000);
  CHECK(at->fd >= 0);
  CHECK(!findSharedRegion(a->data() + at->bytes).has_value());  // past its pages
  int probe = 0;
  CHECK(!findSharedRegion(&probe).has_value());
  const uint64_t id = at->id;

  SharedHostBuffer moved = std::move(*a);  // the registration moves with the memory
  CHECK(findSharedRegion(moved.data())->id == id);
  a.reset();
  CHECK(sharedRegionsReleased() == releasedBefore);  // the moved-from one held nothing
  SharedHostBuffer other(4096);
  CHECK(findSharedRegion(other.data())->id != id);  // ids are never reused
  char* gone = moved.data();
  moved = SharedHostBuffer();
  CHECK(sharedRegionsReleased() == releasedBefore + 1);
  CHECK((!findSharedRegion(gone).has_value() || findSharedRegion(gone)->id != id));

  SharedHostBuffer privateOne(4096, /*share=*/false);
  CHECK(!privateOne.shared());
  CHECK(!findSharedRegion(privateOne.data()).has_value());
  SharedArray<float> arr(7);
  arr.assign(7, 2.5f);
  CHECK(arr.shared());
  CHECK(arr[6] == 2.5f);
  arr.assign(3, 1.f);
  CHECK(arr.size() == 3);
  CHECK(arr[2] == 1.f);
}

TEST_CASE("shared host buffer: DS_COMM_SHM_MAP=0 gives private memory", "[unit]") {
  ::setenv("DS_COMM_SHM_MAP", "0", 1);
  SharedHostBuffer b(4096);
  ::unsetenv("DS_COMM_SHM_MAP");
  CHECK(!b.shared());
  CHECK(b.data()[4095] == 0);
  CHECK(!findSharedRegion(b.data()).has_value());
}

TEST_CASE("shm mapped peers: every collective on registered buffers equals gloo TCP, 2-4 ranks",
          "[multiproc]") {
  for (int n = 2; n <= 4; ++n) {
    for (bool mixed : {false, true}) {
      INFO("world " << n << (mixed ? ", odd ranks private" : ", every rank registered"));
      int port = ds::test::freePort();
      auto res = forkRanks(
          n,
          [&](int r) -> std::string {
            Groups g = makeGroups(r, n, port, true);
            const bool share = !mixed || r % 2 == 0;
            std::string errs = suite(g, share);
            // Peers whose buffers were registered are mapped now (one region each, the last).
            size_t registeredPeers = 0;
            for (int p = 0; p < n; ++p) registeredPeers += p != r && (!mixed || p % 2 == 0);
            const size_t mapped = shmPeerRegionsMapped(*g.shmBackend);
            if (mapped != registeredPeers) {
              errs += fmt::format("rank {}: {} peer regions mapped, expected {}\n", r, mapped,
                                  registeredPeers);
            }
            return errs;
          },
          std::chrono::seconds(300));
      CHECK(failures(res) == "");
    }
  }
}

TEST_CASE("shm mapped peers: a peer's freed buffer is unmapped, its new one used", "[multiproc]") {
  int port = ds::test::freePort();
  auto res = forkRanks(
      3,
      [&](int r) -> std::string {
        Groups g = makeGroups(r, 3, port, true);
        std::string errs;
        for (int round = 0; round < 4; ++round) {
          // A fresh registered buffer every round (the previous one released first).
          const size_t count = 70001 + static_cast<size_t>(round) * 4096;
          std::vector<char> want = input(DType::kI32, count, r + round, true);
          SharedHostBuffer buf(want.size());
          std::memcpy(buf.data(), want.data(), want.size());
          g.shm->allreduce({buf.data(), count, DType::kI32, Device::kCpu})->wait();
          g.tcp->allreduce(bv(want, count, DType::kI32))->wait();
          if (std::memcmp(buf.data(), want.data(), want.size()) != 0)
            errs += fmt::format("rank {} round {}: allreduce differs\n", r, round);
          const size_t mapped = shmPeerRegionsMapped(*g.shmBackend);
          if (mapped != 2)
            errs += fmt::format("rank {} round {}: {} peer regions mapped, expected 2\n", r, round,
                                mapped);
        }
        return errs;
      },
      std::chrono::seconds(120));
  CHECK(failures(res) == "");
}

TEST_CASE("shm mapped peers: off (DS_COMM_SHM_MAP=0 / mapPeers false) copies with CMA, right",
          "[multiproc]") {
  int port = ds::test::freePort();
  auto res = forkRanks(
      2,
      [&](int r) -> std::string {
        ::setenv("DS_COMM_SHM_MAP", "0", 1);
        if (shmOptionsFromEnv(std::chrono::seconds(60), "gloo").mapPeers)
          return "DS_COMM_SHM_MAP=0 did not turn the option off";
        ::unsetenv("DS_COMM_SHM_MAP");
        Groups g = makeGroups(r, 2, port, false);
        std::string errs = suite(g, true);
        if (shmPeerRegionsMapped(*g.shmBackend) != 0) errs += "a peer region was mapped\n";
        if (g.shm->mappedPeerBytes(16 << 20) != 0) errs += "mapped bytes reported\n";
        return errs;
      },
      std::chrono::seconds(240));
  CHECK(failures(res) == "");
}

TEST_CASE("shm mapped peers: the resident-set cost reported for an allreduce", "[multiproc]") {
  int port = ds::test::freePort();
  auto res = forkRanks(
      4,
      [&](int r) -> std::string {
        Groups g = makeGroups(r, 4, port, true);
        // This rank's quarter of each of 3 peers' buffers, in whole pages (plus one for an
        // unaligned edge); nothing below the single-copy threshold (4096 bytes here).
        const size_t got = g.shm->mappedPeerBytes(size_t{16} << 20);
        std::string errs;
        if (got != 3 * ((size_t{4} << 20) + 4096))
          errs += fmt::format("rank {}: {} bytes for 16 MiB\n", r, got);
        if (g.shm->mappedPeerBytes(1000) != 0) errs += "bytes reported below the threshold\n";
        if (g.tcp->mappedPeerBytes(size_t{16} << 20) != 0) errs += "the TCP group reports bytes\n";
        return errs;
      },
      std::chrono::seconds(60));
  CHECK(failures(res) == "");
}

TEST_CASE("shm mapped peers: a peer SIGKILLed mid-allreduce fails the others, naming it",
          "[multiproc]") {
  // The mapped path has no failing copy to notice a dead peer by (its pages stay readable
  // through the mapping): the survivors must still fail at the step, naming it, in bounded time.
  const int n = 3, victim = 1;
  ds::test::TempDir dir;
  int port = ds::test::freePort();
  auto res = forkRanks(
      n,
      [&](int r) -> std::string {
        Groups g = makeGroups(r, n, port, true);
        SharedArray<float> v(4 << 20);  // 16 MiB
        v.assign(v.size(), 1.f);
        g.shm->allreduce({v.data(), v.size(), DType::kF32, Device::kCpu})->wait();
        if (shmPeerRegionsMapped(*g.shmBackend) != 2) return "the peers' buffers were not mapped";
        ds::test::writeFile(dir.file("ready" + std::to_string(r)), "1");
        const auto start = std::chrono::steady_clock::now();
        try {
          while (std::chrono::steady_clock::now() - start < std::chrono::seconds(60)) {
            g.shm->allreduce({v.data(), v.size(), DType::kF32, Device::kCpu})
                ->wait(std::chrono::seconds(60));
          }
        } catch (const CommError& e) {
          const auto took = std::chrono::steady_clock::now() - start;
          return fmt::format("CommError peer={} after {} ms: {}", e.peer(),
                             std::chrono::duration_cast<std::chrono::milliseconds>(took).count(),
                             e.what());
        }
        return "no failure seen";
      },
      std::chrono::seconds(90),
      [&](const std::vector<pid_t>& pids) { killWhenReady(dir, n, pids[victim]); });
  CHECK(res[victim].signal == SIGKILL);
  for (int r = 0; r < n; ++r) {
    if (r == victim) continue;
    INFO("rank " << r << ": " << res[r].text);
    CHECK_FALSE(res[r].timedOut);
    CHECK(res[r].signal == 0);
    CHECK_THAT(res[r].text, Catch::StartsWith("CommError peer=1 "));
    CHECK_THAT(res[r].text, Catch::Contains("rank 1"));
  }
}

TEST_CASE("shm mapped peers: with CMA refused, registered buffers still go single-copy",
          "[multiproc]") {
  if (kAuditArch == 0) DS_SKIP("no seccomp filter written for this architecture");
  for (int n = 2; n <= 3; ++n) {
    INFO("world " << n);
    int port = ds::test::freePort();
    auto res = forkRanks(
        n,
        [&](int r) -> std::string {
          std::string why = refuseCma();
          if (!why.empty()) return why;
          Groups g = makeGroups(r, n, port, true, /*requireCma=*/false);
          std::string errs = suite(g, true);
          const size_t mapped = shmPeerRegionsMapped(*g.shmBackend);
          if (mapped != static_cast<size_t>(n - 1))
            errs += fmt::format("rank {}: {} peer regions mapped, expected {}\n", r, mapped, n - 1);
          if (g.shm->mappedPeerBytes(size_t{16} << 20) == 0)
            errs += fmt::format("rank {}: no mapped bytes reported\n", r);
          // Some buffers private: every member takes the copy path for those, results still right.
          return errs + suite(g, r % 2 == 0);
        },
        std::chrono::seconds(300));
    CHECK(failures(res) == "");
  }
}
