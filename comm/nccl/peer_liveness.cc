// PeerWatchdog: beat, then (only while some watched group has Work pending) read the members'
// counters and judge them. Store reads happen without the registry lock; callbacks run with it,
// so unregistering waits for a callback in progress and never races one.
#include "comm/nccl/peer_liveness.h"

#include <unistd.h>

#include <algorithm>
#include <set>

#include "comm/comm_knobs.h"
#include "comm/peer_process.h"
#include "core/env.h"
#include "core/error.h"
#include "core/log.h"

namespace ds::comm::nccl_impl {

using std::chrono::milliseconds;

LivenessOptions LivenessOptions::fromEnv() {
  LivenessOptions o;
  o.peerTimeout = knobSecondsOrDefault(knobs::kNcclPeerTimeout);
  int64_t beat = knobIntOrDefault(knobs::kNcclHeartbeatMs);
  o.beat = std::min(milliseconds(beat), std::max(milliseconds(1), o.peerTimeout / 4));
  return o;
}

void StalenessTracker::observe(int rank, const std::string& value, LivenessClock::time_point now) {
  auto it = seen_.find(rank);
  if (it == seen_.end()) {
    seen_.emplace(rank, Seen{value, now});
  } else if (it->second.value != value) {
    it->second = Seen{value, now};
  }
}

milliseconds StalenessTracker::silentFor(int rank, LivenessClock::time_point now) const {
  auto it = seen_.find(rank);
  if (it == seen_.end()) return milliseconds(0);
  return std::chrono::duration_cast<milliseconds>(now - it->second.changed);
}

void StalenessTracker::retainOnly(const std::vector<int>& keep) {
  for (auto it = seen_.begin(); it != seen_.end();) {
    if (std::find(keep.begin(), keep.end(), it->first) == keep.end()) {
      it = seen_.erase(it);
    } else {
      ++it;
    }
  }
}

std::string heartbeatKey(int rank) { return fmt::format("nccl/hb/{}", rank); }
std::string identityKey(int rank) { return fmt::format("nccl/peer/{}", rank); }

namespace {
std::string hostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown-host";
  return buf;
}
}  // namespace

PeerWatchdog::PeerWatchdog(std::shared_ptr<Store> store, int myRank, LivenessOptions options)
    : store_(std::move(store)), myRank_(myRank), options_(options), myHost_(hostName()) {
  store_->setString(identityKey(myRank_),
                    fmt::format("{} {} {}", myHost_, ::getpid(), localProcessId()));
  store_->add(heartbeatKey(myRank_), 1);
  thread_ = std::thread([this] { run(); });
}

PeerWatchdog::~PeerWatchdog() {
  {
    std::lock_guard<std::mutex> lock(stopMu_);
    stop_ = true;
  }
  stopCv_.notify_all();
  thread_.join();
}

PeerWatchdog::Registration::~Registration() { owner_->unregister(id_); }

std::unique_ptr<PeerWatchdog::Registration> PeerWatchdog::watch(std::vector<int> members,
                                                                Pending pending,
                                                                OnFailure onFailure) {
  std::lock_guard<std::mutex> lock(groupsMu_);
  uint64_t id = nextId_++;
  groups_[id] = Group{std::move(members), std::move(pending), std::move(onFailure), false};
  return std::make_unique<Registration>(this, id);
}

void PeerWatchdog::unregister(uint64_t id) {
  std::lock_guard<std::mutex> lock(groupsMu_);
  groups_.erase(id);
}

void PeerWatchdog::run() {
  std::unique_lock<std::mutex> lock(stopMu_);
  while (!stopCv_.wait_for(lock, options_.beat, [&] { return stop_; })) {
    lock.unlock();
    try {
      tick();
    } catch (const std::exception& e) {
      DS_LOG_WARN("nccl", "liveness watchdog: {}", e.what());
    }
    lock.lock();
  }
}

void PeerWatchdog::beat() {
  if (storeError_) return;  // a broken store connection never recovers
  try {
    store_->add(heartbeatKey(myRank_), 1);
  } catch (const std::exception& e) {
    storeError_ = e.what();
  }
}

std::string PeerWatchdog::describe(int rank) {
  auto it = identity_.find(rank);
  if (it == identity_.end() && !storeError_) {
    try {
      std::string s = store_->getString(identityKey(rank), milliseconds(100));
      auto sp = s.find(' ');
      if (sp != std::string::npos) {
        auto sp2 = s.find(' ', sp + 1);
        Identity id{s.substr(0, sp), std::stol(s.substr(sp + 1, sp2 - sp - 1)),
                    sp2 == std::string::npos ? "" : s.substr(sp2 + 1)};
        it = identity_.emplace(rank, std::move(id)).first;
      }
    } catch (const std::exception&) {
    }
  }
  if (it == identity_.end()) return fmt::format("rank {}", rank);
  return fmt::format("rank {} (host {}, pid {})", rank, it->second.host, it->second.pid);
}

// Evidence, strongest first: the store is gone (its host is to blame), the process is gone from
// this host (same boot and pid namespace, comm/peer_process.h) and has missed two beats, or the
// counter has been still for the peer timeout.
std::optional<PeerFailure> PeerWatchdog::judge(int rank, LivenessClock::time_point now) {
  if (storeError_) {
    return PeerFailure{options_.storeHostRank,
                       fmt::format("the store hosted by rank {} is unreachable ({}), so rank {} "
                                   "is taken to have died",
                                   options_.storeHostRank, *storeError_, options_.storeHostRank)};
  }
  milliseconds silent = tracker_.silentFor(rank, now);
  std::string who = describe(rank);
  auto id = identity_.find(rank);
  if (id != identity_.end() && silent >= 2 * options_.beat && processGone(id->second.process)) {
    return PeerFailure{rank, fmt::format("peer {} is gone: its process no longer exists and it "
                                         "sent no heartbeat for {} ms",
                                         who, silent.count())};
  }
  if (silent >= options_.peerTimeout) {
    return PeerFailure{rank, fmt::format("peer {} sent no heartbeat for {} ms "
                                         "(DS_NCCL_PEER_TIMEOUT {} ms): it died or hangs",
                                         who, silent.count(), options_.peerTimeout.count())};
  }
  return std::nullopt;
}

void PeerWatchdog::tick() {
  std::lock_guard<std::mutex> tickLock(tickMu_);
  beat();
  // Which groups are waiting, and on whom?
  std::vector<uint64_t> busy;
  std::set<int> watched;
  {
    std::lock_guard<std::mutex> lock(groupsMu_);
    for (auto& [id, g] : groups_) {
      if (g.fired || !g.pending()) continue;
      busy.push_back(id);
      for (int r : g.members)
        if (r != myRank_) watched.insert(r);
    }
  }
  tracker_.retainOnly(std::vector<int>(watched.begin(), watched.end()));
  if (busy.empty()) return;
  std::map<int, PeerFailure> dead;
  for (int r : watched) {
    if (!storeError_) {
      std::string value;
      try {
        value = store_->getString(heartbeatKey(r), milliseconds(0));
      } catch (const TimeoutError&) {
        // Never beat: its silence counts from now.
      } catch (const std::exception& e) {
        storeError_ = e.what();
      }
      tracker_.observe(r, value, LivenessClock::now());
    }
    if (auto f = judge(r, LivenessClock::now())) dead.emplace(r, *f);
  }
  if (dead.empty()) return;
  std::lock_guard<std::mutex> lock(groupsMu_);
  for (uint64_t id : busy) {
    auto it = groups_.find(id);
    if (it == groups_.end() || it->second.fired) continue;
    for (int r : it->second.members) {
      auto d = dead.find(r);
      // The store's failure is every group's: name its host even outside the group.
      if (d == dead.end() && storeError_ && !dead.empty()) d = dead.begin();
      if (d == dead.end()) continue;
      it->second.fired = true;
      DS_LOG_ERROR("nccl", "rank {}: {}", myRank_, d->second.message);
      it->second.onFailure(d->second);
      break;
    }
  }
}

}  // namespace ds::comm::nccl_impl
