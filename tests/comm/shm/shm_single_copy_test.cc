// The single-copy (CMA) path of the shm collectives (comm/shm/shm_single_copy.cc), in real
// processes against the gloo TCP path, bitwise: sizes straddling the threshold (set to 4 KiB
// here) and spanning several 256 KiB chunks, odd counts, 2-4 ranks, every reducible dtype,
// every collective but barrier (reduce: the others' buffers untouched), in-place reduce_scatter
// and allgather; at 3-4 ranks with inexact values (gloo's ring order differs there) the reductions
// against the slot path, which reduces in rank order too; DS_COMM_SHM_CMA=0 keeps the slot path; a
// rank whose CMA calls are refused (a seccomp filter answering EPERM: as root, a non-dumpable
// process can still be read, so prctl(PR_SET_DUMPABLE, 0) cannot simulate it here) turns the path
// off on every rank and the results stay right.

#include <catch2/catch.hpp>

#include <cstddef>

#include "comm/gloo/gloo_backend.h"
#include "comm/process_group.h"
#include "comm/shm/shm_backend.h"
#include "comm/shm/shm_collectives.h"
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

constexpr size_t kThreshold = 4096;

struct Groups {
  std::unique_ptr<ProcessGroup> shm;
  std::unique_ptr<ProcessGroup> tcp;
  bool singleCopy = false;
};

Groups makeGroups(int rank, int size, int port, const ShmOptions& so) {
  auto store = procStore(rank, port);
  Groups g;
  g.tcp = std::make_unique<ProcessGroup>(
      createGlooBackend(std::make_shared<PrefixStore>("tcp", store), rank, size, tcpOptions()));
  auto wrapped = wrapWithShm(
      createGlooBackend(std::make_shared<PrefixStore>("shm", store), rank, size, tcpOptions()),
      store, so);
  if (!isShmBackend(*wrapped)) throw std::runtime_error("the group of one host is not on shm");
  g.singleCopy = isShmSingleCopy(*wrapped);
  g.shm = std::make_unique<ProcessGroup>(std::move(wrapped));
  return g;
}

// An shm group over the gloo group of `prefix` in `store`, on the single-copy path or not.
std::unique_ptr<ProcessGroup> shmGroup(const std::shared_ptr<Store>& store, const char* prefix,
                                       int rank, int size, const ShmOptions& so, bool singleCopy) {
  auto wrapped = wrapWithShm(
      createGlooBackend(std::make_shared<PrefixStore>(prefix, store), rank, size, tcpOptions()),
      store, so);
  if (!isShmBackend(*wrapped) || isShmSingleCopy(*wrapped) != singleCopy) {
    throw std::runtime_error(
        fmt::format("group {}: not on shm with single copy {}", prefix, singleCopy ? "on" : "off"));
  }
  return std::make_unique<ProcessGroup>(std::move(wrapped));
}

ShmOptions testOptions() {
  ShmOptions so;
  so.slotBytes = 64 << 10;
  so.timeout = std::chrono::seconds(60);
  so.cmaMinBytes = kThreshold;
  return so;
}

// reduce_scatter with the output on the input's own block, allgather with the input on the
// output's own block, against the TCP group's out-of-place results.
std::string inPlace(ProcessGroup& shm, ProcessGroup& tcp, DType t, size_t count, bool exact) {
  const int n = shm.size(), r = shm.rank();
  const size_t es = dtypeSize(t);
  const auto me = static_cast<size_t>(r);
  std::string errs;
  auto counts = evenCounts(count, n);
  size_t begin = 0;
  for (size_t b = 0; b < me; ++b) begin += counts[b];
  std::vector<char> a = input(t, count, r, exact), b = a, want(counts[me] * es);
  shm.reduceScatter(bv(a, count, t), {a.data() + begin * es, counts[me], t, Device::kCpu}, counts,
                    ReduceOp::kSum)
      ->wait();
  tcp.reduceScatter(bv(b, count, t), bv(want, counts[me], t), counts, ReduceOp::kSum)->wait();
  if (std::memcmp(a.data() + begin * es, want.data(), want.size()) != 0) {
    errs += fmt::format("rank {}: in-place reduce_scatter {} count {} differs\n", r, dtypeName(t),
                        count);
  }
  std::vector<char> mine = input(t, counts[me], r, exact), out(count * es), ref(count * es);
  std::memcpy(out.data() + begin * es, mine.data(), mine.size());
  shm.allgather({out.data() + begin * es, counts[me], t, Device::kCpu}, bv(out, count, t), counts)
      ->wait();
  tcp.allgather(bv(mine, counts[me], t), bv(ref, count, t), counts)->wait();
  if (out != ref) {
    errs +=
        fmt::format("rank {}: in-place allgather {} count {} differs\n", r, dtypeName(t), count);
  }
  return errs;
}

// Every collective around the threshold and over several chunks; `big` adds a size of 1.2 MB.
std::string suite(ProcessGroup& shm, ProcessGroup& tcp, bool big) {
  const bool exactAll = shm.size() > 2;
  std::string errs;
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16, DType::kI32, DType::kI64}) {
    const bool exact = exactAll || t == DType::kI32 || t == DType::kI64;
    const size_t es = dtypeSize(t);
    std::vector<size_t> counts{
        1, kThreshold / es - 1, kThreshold / es, kThreshold / es + 1, 4099, 70001};
    if (big) counts.push_back(300007);
    for (size_t count : counts) {
      for (const char* what : {"allreduce", "reduce_scatter", "allgather", "broadcast", "reduce"}) {
        std::vector<ReduceOp> ops{ReduceOp::kSum};
        if (std::string(what) == "allreduce") {
          ops = {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin};
          if (!exactAll || t == DType::kI32 || t == DType::kI64) ops.push_back(ReduceOp::kAvg);
        }
        for (ReduceOp op : ops) errs += compareOne(shm, tcp, what, t, count, op, exact);
      }
      errs += inPlace(shm, tcp, t, count * static_cast<size_t>(shm.size()), exact);
    }
  }
  return errs;
}

}  // namespace

TEST_CASE("shm single copy: every collective equals the gloo TCP path, 2-4 processes",
          "[multiproc]") {
  for (int n = 2; n <= 4; ++n) {
    INFO("world " << n);
    int port = ds::test::freePort();
    auto res = forkRanks(
        n,
        [&](int r) -> std::string {
          Groups g = makeGroups(r, n, port, testOptions());
          if (!g.singleCopy) return "the single-copy path is off on this host";
          return suite(*g.shm, *g.tcp, n != 3);
        },
        std::chrono::seconds(300));
    CHECK(failures(res) == "");
  }
}

TEST_CASE("shm single copy: reductions bitwise the slot path's at 3-4 ranks, inexact values",
          "[multiproc]") {
  for (int n = 3; n <= 4; ++n) {
    INFO("world " << n);
    int port = ds::test::freePort();
    auto res = forkRanks(
        n,
        [&](int r) -> std::string {
          auto store = procStore(r, port);
          ShmOptions slotOnly = testOptions();
          slotOnly.cma = false;
          // The chunk (cmaChunkBytes) changes no result: the derived one and the smallest.
          ShmOptions small = testOptions();
          small.cmaChunkBytes = 16 << 10;
          auto cma = shmGroup(store, "cma", r, n, testOptions(), true);
          auto cmaSmall = shmGroup(store, "cma16k", r, n, small, true);
          auto slot = shmGroup(store, "slot", r, n, slotOnly, false);
          std::string errs;
          auto one = [&](const char* what, DType t, size_t count, ReduceOp op) {
            for (ProcessGroup* group : {cma.get(), cmaSmall.get()}) {
              std::string e = compareOne(*group, *slot, what, t, count, op, false);
              if (!e.empty())
                errs += e.substr(0, e.find(" differs")) + " differs from the slot path" +
                        (group == cmaSmall.get() ? " (16 KiB chunks)" : "") + "\n";
            }
          };
          for (DType t : {DType::kF32, DType::kBF16}) {
            for (size_t count : {size_t{70001}, size_t{300007}}) {
              for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) one("allreduce", t, count, op);
              one("reduce", t, count, ReduceOp::kSum);
              one("reduce_scatter", t, count, ReduceOp::kSum);
            }
          }
          return errs;
        },
        std::chrono::seconds(240));
    CHECK(failures(res) == "");
  }
}

TEST_CASE("shm single copy: DS_COMM_SHM_CMA=0 keeps the copy path, results unchanged",
          "[multiproc]") {
  int port = ds::test::freePort();
  auto res = forkRanks(
      2,
      [&](int r) -> std::string {
        ::setenv("DS_COMM_SHM_CMA", "0", 1);
        ShmOptions so = shmOptionsFromEnv(std::chrono::seconds(60), "gloo");
        if (so.cma) return "DS_COMM_SHM_CMA=0 did not turn the option off";
        so.slotBytes = 64 << 10;
        so.cmaMinBytes = kThreshold;
        Groups g = makeGroups(r, 2, port, so);
        if (g.singleCopy) return "the single-copy path is on despite DS_COMM_SHM_CMA=0";
        return suite(*g.shm, *g.tcp, false);
      },
      std::chrono::seconds(240));
  CHECK(failures(res) == "");
}

TEST_CASE("shm single copy: a rank refused CMA turns it off on every rank, results right",
          "[multiproc]") {
  if (kAuditArch == 0) DS_SKIP("no seccomp filter written for this architecture");
  for (int refused : {0, 2}) {
    INFO("refused at rank " << refused);
    int port = ds::test::freePort();
    auto res = forkRanks(
        3,
        [&](int r) -> std::string {
          if (r == refused) {
            std::string why = refuseCma();
            if (!why.empty()) return why;  // the others then time out too: a failure, not a hang
          }
          Groups g = makeGroups(r, 3, port, testOptions());
          if (g.singleCopy) return "the single-copy path is on although a rank is refused CMA";
          return suite(*g.shm, *g.tcp, false);
        },
        std::chrono::seconds(240));
    CHECK(failures(res) == "");
  }
}

TEST_CASE("shm single copy: the reduction chunk is half the L2 over the ranks, or the knob's",
          "[unit]") {
  using ds::comm::shm_impl::cmaChunkBytes;
  CHECK(cmaChunkBytes(0, 2, 512 << 10) == (128 << 10));  // a Zen core's 512 KiB L2, 2 ranks
  CHECK(cmaChunkBytes(0, 4, 512 << 10) == (64 << 10));
  CHECK(cmaChunkBytes(0, 2, 2 << 20) == (512 << 10));    // a 2 MiB L2
  CHECK(cmaChunkBytes(0, 64, 512 << 10) == (16 << 10));  // never below 16 KiB
  CHECK(cmaChunkBytes(0, 2, 0) == (256 << 10));          // L2 unknown
  CHECK(cmaChunkBytes(100000, 2, 512 << 10) == 98304);   // the knob's, down to 4 KiB
  CHECK(cmaChunkBytes(size_t{1} << 30, 2, 512 << 10) == (4 << 20));
  CHECK(ds::comm::shm_impl::l2CacheBytes() % 1024 == 0);
}
