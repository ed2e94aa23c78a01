// The shared-memory layout, steps and failure protocol (shm_link.h).
// Layout: [header: 4 KiB][State per rank, 192 B each, rounded up to 4 KiB][slot 0]...[slot n-1].
// A step is numbered the same on every member (every member runs every step of every
// collective), so "rank p has arrived at step s" is seq(p) >= s (modulo 2^32). A waiter spins a
// little, then yields, then sleeps on the peer's seq word (futex, 20 ms at a time) after raising
// the peer's sleeper count; an arriving rank wakes its word only when that count is non-zero.
#include "comm/shm/shm_link.h"

#include <fmt/format.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <cstring>
#include <thread>

#include "comm/peer_process.h"
#include "comm/shm/shm_link_state.h"
#include "core/error.h"

namespace ds::comm::shm_impl {
namespace {

constexpr uint64_t kMagic = 0x6473686d2d763033ull;  // "dshm-v03"
constexpr size_t kPage = 4096;

constexpr size_t roundUp(size_t v, size_t to) { return (v + to - 1) / to * to; }

struct Header {
  uint64_t magic;
  uint32_t size;
  uint32_t pad;
  uint64_t slotBytes;
  std::atomic<uint32_t> mapped;
  std::atomic<int32_t> abortRank;  // -1: none; else the group rank at fault
};
static_assert(sizeof(Header) <= kPage);

bool reached(uint32_t seq, uint32_t target) { return static_cast<int32_t>(seq - target) >= 0; }

void futexWait(std::atomic<uint32_t>* word, uint32_t expected, std::chrono::milliseconds t) {
  struct timespec ts {};
  ts.tv_sec = static_cast<time_t>(t.count() / 1000);
  ts.tv_nsec = static_cast<long>(t.count() % 1000) * 1000000L;
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void futexWake(std::atomic<uint32_t>* word) {
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

constexpr int kSpins = 2000;
constexpr int kYields = 200;
constexpr auto kSleep = std::chrono::milliseconds(20);
constexpr auto kLivenessEvery = std::chrono::milliseconds(200);
constexpr auto kQuiesceCheckEvery = std::chrono::milliseconds(50);

}  // namespace

size_t segmentBytes(int size, size_t slotBytes) {
  return kPage + roundUp(static_cast<size_t>(size) * sizeof(ShmLink::State), kPage) +
         static_cast<size_t>(size) * slotBytes;
}

void ShmLink::initHeader(char* base, int size, size_t slotBytes) {
  auto* h = new (base) Header{};
  h->size = static_cast<uint32_t>(size);
  h->slotBytes = slotBytes;
  h->mapped.store(0);
  h->abortRank.store(-1);
  for (int r = 0; r < size; ++r) {
    new (base + kPage + static_cast<size_t>(r) * sizeof(State)) State{};
  }
  std::atomic_thread_fence(std::memory_order_release);
  h->magic = kMagic;
}

ShmLink::ShmLink(ShmSegment seg, int rank, int size, size_t slotBytes,
                 std::chrono::milliseconds timeout, std::vector<int> globalRanks)
    : seg_(std::move(seg)),
      rank_(rank),
      size_(size),
      slotBytes_(slotBytes),
      timeout_(timeout),
      globalRanks_(std::move(globalRanks)),
      maps_(size) {
  auto* h = reinterpret_cast<Header*>(seg_.data());
  if (h->magic != kMagic || h->size != static_cast<uint32_t>(size) || h->slotBytes != slotBytes) {
    throw CommError(
        fmt::format("shared memory: {} has a foreign or different header", seg_.name()));
  }
  std::string id = localProcessId();
  State& me = state(rank);
  std::strncpy(me.procId, id.c_str(), kIdBytes - 1);
  me.pid = static_cast<int32_t>(::getpid());
  me.self = reinterpret_cast<uint64_t>(&me);
  me.cmaVerdict = kCmaUnset;
  seq_ = state(rank).seq.load();
  h->mapped.fetch_add(1, std::memory_order_acq_rel);
}

ShmLink::~ShmLink() {
  if (!seg_.data()) return;
  state(rank_).closed.store(1);
  futexWake(&state(rank_).seq);
}

ShmLink::State& ShmLink::state(int r) const {
  return *reinterpret_cast<State*>(seg_.data() + kPage + static_cast<size_t>(r) * sizeof(State));
}

char* ShmLink::slot(int r, int half) const {
  size_t states = roundUp(static_cast<size_t>(size_) * sizeof(State), kPage);
  return seg_.data() + kPage + states + static_cast<size_t>(r) * slotBytes_ +
         static_cast<size_t>(half) * halfBytes();
}

void ShmLink::awaitMapped(const std::function<std::string()>& failed) {
  auto* h = reinterpret_cast<Header*>(seg_.data());
  auto start = std::chrono::steady_clock::now();
  auto lastPoll = start;
  while (h->mapped.load(std::memory_order_acquire) < static_cast<uint32_t>(size_)) {
    auto now = std::chrono::steady_clock::now();
    if (now - lastPoll > std::chrono::milliseconds(50)) {
      lastPoll = now;
      std::string why = failed ? failed() : "";
      if (!why.empty()) {
        seg_.unlink();
        throw CommError(fmt::format("shared memory: {} (rank {} gives up)", why, describe(rank_)));
      }
    }
    if (now - start > timeout_) {
      seg_.unlink();
      throw TimeoutError(
          fmt::format("shared memory: {} of {} local ranks mapped {} within {:.1f} s ({} waited) "
                      "[DS_TIMEOUT]",
                      h->mapped.load(), size_, seg_.name(),
                      std::chrono::duration<double>(timeout_).count(), describe(rank_)));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  seg_.unlink();  // every member has it mapped: nothing can be left behind from here on
}

void ShmLink::checkUsable() const {
  if (broken_) std::rethrow_exception(broken_);
}

float* ShmLink::scratch(int index, size_t floats) {
  if (scratch_.size() <= static_cast<size_t>(index))
    scratch_.resize(static_cast<size_t>(index) + 1);
  auto& v = scratch_[static_cast<size_t>(index)];
  if (v.size() < floats) v.resize(floats);
  return v.data();
}

std::string ShmLink::describe(int groupRank) const {
  if (groupRank < 0 || groupRank >= static_cast<int>(globalRanks_.size())) return "?";
  return fmt::format("rank {}", globalRanks_[static_cast<size_t>(groupRank)]);
}

void ShmLink::step(const char* what) {
  checkUsable();
  State& me = state(rank_);
  me.remoteBusy.store(0, std::memory_order_release);  // done with the peers' buffers
  uint32_t target = ++seq_;
  me.seq.store(target, std::memory_order_seq_cst);
  if (me.sleepers.load(std::memory_order_seq_cst) > 0) futexWake(&me.seq);
  for (int p = 0; p < size_; ++p) {
    if (p != rank_) waitFor(p, target, what);
  }
}

void ShmLink::waitFor(int peer, uint32_t target, const char* what) {
  State& s = state(peer);
  for (int i = 0; i < kSpins; ++i) {
    if (reached(s.seq.load(std::memory_order_acquire), target)) return;
    cpuRelax();
  }
  auto* h = reinterpret_cast<Header*>(seg_.data());
  auto start = std::chrono::steady_clock::now();
  auto lastCheck = start;
  for (int i = 0;; ++i) {
    uint32_t v = s.seq.load(std::memory_order_acquire);
    if (reached(v, target)) return;
    int32_t culprit = h->abortRank.load(std::memory_order_acquire);
    if (culprit >= 0) fail(culprit, what, "failed (recorded by a member of the group)", false);
    if (s.closed.load())
      fail(peer, what, "left the group (its shared-memory endpoint closed)", false);
    auto now = std::chrono::steady_clock::now();
    if (now - start > timeout_) {
      fail(peer, what,
           fmt::format("did not arrive within {:.1f} s [DS_TIMEOUT]",
                       std::chrono::duration<double>(timeout_).count()),
           true);
    }
    if (now - lastCheck > kLivenessEvery) {
      lastCheck = now;
      if (processGone(std::string(s.procId))) {
        fail(peer, what, "is gone (its process on this host exited)", false);
      }
    }
    if (i < kYields) {
      ::sched_yield();
      continue;
    }
    s.sleepers.fetch_add(1, std::memory_order_seq_cst);
    v = s.seq.load(std::memory_order_seq_cst);
    if (!reached(v, target) && h->abortRank.load() < 0) futexWait(&s.seq, v, kSleep);
    s.sleepers.fetch_sub(1, std::memory_order_seq_cst);
  }
}

void ShmLink::wakeAll() {
  for (int r = 0; r < size_; ++r) futexWake(&state(r).seq);
}

int32_t ShmLink::abortedBy() const {
  return reinterpret_cast<Header*>(seg_.data())->abortRank.load(std::memory_order_seq_cst);
}

void ShmLink::quiesce() {
  const auto start = std::chrono::steady_clock::now();
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    State& s = state(p);
    auto lastCheck = start - kLivenessEvery;
    while (s.remoteBusy.load(std::memory_order_seq_cst) != 0 && s.closed.load() == 0) {
      auto now = std::chrono::steady_clock::now();
      if (now - start > timeout_) return;  // a peer stuck in a copy: give up waiting
      if (now - lastCheck >= kQuiesceCheckEvery) {
        lastCheck = now;
        if (processGone(std::string(s.procId))) break;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
}

void ShmLink::fail(int culprit, const char* what, const std::string& detail, bool timeout) {
  auto* h = reinterpret_cast<Header*>(seg_.data());
  state(rank_).remoteBusy.store(0, std::memory_order_seq_cst);
  int32_t none = -1;
  h->abortRank.compare_exchange_strong(none, culprit, std::memory_order_seq_cst);
  wakeAll();
  // A peer in the middle of a single-copy collective may still write into this member's
  // buffers: it sees the abort before its next copy; wait for that before the caller may free
  // them.
  quiesce();
  std::string msg = fmt::format("shm {} ({} of {}, group rank {}): {} {}", what, describe(rank_),
                                size_, rank_, describe(culprit), detail);
  try {
    if (timeout) throw TimeoutError(msg);
    throw CommError(msg, culprit < static_cast<int>(globalRanks_.size())
                             ? globalRanks_[static_cast<size_t>(culprit)]
                             : -1);
  } catch (...) {
    broken_ = std::current_exception();
    throw;
  }
}

}  // namespace ds::comm::shm_impl
