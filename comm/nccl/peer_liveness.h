// Peer liveness for the nccl backend, CUDA-free so that it is unit-tested on any machine. NCCL
// has no notion of a dead peer on intra-node transports (the kernels spin), so every process
// bumps a heartbeat counter in the store ("nccl/hb/<rank>") and publishes "host pid process"
// ("nccl/peer/<rank>"; process is comm/peer_process.h's id); while a watched group has Work
// pending, PeerWatchdog reads its members' counters and reports a member once to the group's
// callback when its counter has not moved for the peer timeout, when its process is gone from this
// host, or when the store (hosted by rank 0) cannot be reached any more.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "comm/store/store.h"

namespace ds::comm::nccl_impl {

using LivenessClock = std::chrono::steady_clock;

struct LivenessOptions {
  std::chrono::milliseconds beat{1000};          // heartbeat (and check) period
  std::chrono::milliseconds peerTimeout{10000};  // a counter unchanged this long = dead
  int storeHostRank = 0;                         // who hosts the store (blamed when it is gone)
  // DS_NCCL_PEER_TIMEOUT (seconds, fractions allowed; default 10) and DS_NCCL_HEARTBEAT_MS
  // (default 1000, at most a quarter of the peer timeout).
  static LivenessOptions fromEnv();
};

// How long each peer's heartbeat value has stayed the same, measured on this host's monotonic
// clock (no clock agreement between hosts is needed). Pure: time is passed in.
class StalenessTracker {
 public:
  // Records the value read for rank at `now` (a missing key reads as "").
  void observe(int rank, const std::string& value, LivenessClock::time_point now);
  // Time since the value last changed (since the first observation if it never did); 0 for a
  // rank never observed.
  std::chrono::milliseconds silentFor(int rank, LivenessClock::time_point now) const;
  // Drops every rank not in `keep`: tracking restarts (with a fresh baseline) when it is next
  // observed, so time spent idle never counts as silence.
  void retainOnly(const std::vector<int>& keep);

 private:
  struct Seen {
    std::string value;
    LivenessClock::time_point changed;
  };
  std::map<int, Seen> seen_;
};

// A member found dead: world rank, and the message that names it (rank, host, evidence).
struct PeerFailure {
  int rank = -1;
  std::string message;
};

std::string heartbeatKey(int rank);
std::string identityKey(int rank);

class PeerWatchdog {
 public:
  using Pending = std::function<bool()>;
  using OnFailure = std::function<void(const PeerFailure&)>;

  // Publishes this rank's identity and first beat (synchronously, so every member's key exists
  // once the communicator is up), then starts the thread.
  PeerWatchdog(std::shared_ptr<Store> store, int myRank, LivenessOptions options);
  ~PeerWatchdog();  // stops and joins the thread (at most one store call plus a callback)
  PeerWatchdog(const PeerWatchdog&) = delete;
  PeerWatchdog& operator=(const PeerWatchdog&) = delete;

  // Watches `members` (world ranks) while pending() is true; onFailure runs once, on the
  // watchdog thread, for the first member found dead. Both run with the watchdog's registry lock
  // held: they must not call back into the watchdog. The registration ends when the returned
  // object is destroyed (which waits for a callback in progress).
  class Registration {
   public:
    Registration(PeerWatchdog* owner, uint64_t id) : owner_(owner), id_(id) {}
    ~Registration();
    Registration(const Registration&) = delete;
    Registration& operator=(const Registration&) = delete;

   private:
    PeerWatchdog* owner_;
    uint64_t id_;
  };
  std::unique_ptr<Registration> watch(std::vector<int> members, Pending pending,
                                      OnFailure onFailure);

  const LivenessOptions& options() const { return options_; }
  int rank() const { return myRank_; }

  // One round of the thread's loop (beat, then check): exposed for tests.
  void tick();

 private:
  struct Group {
    std::vector<int> members;
    Pending pending;
    OnFailure onFailure;
    bool fired = false;
  };
  void run();
  void beat();
  std::optional<PeerFailure> judge(int rank, LivenessClock::time_point now);
  std::string describe(int rank);
  void unregister(uint64_t id);

  std::shared_ptr<Store> store_;
  int myRank_;
  LivenessOptions options_;
  std::string myHost_;
  std::optional<std::string> storeError_;  // the first store failure seen (under tickMu_)
  std::mutex tickMu_;                      // serializes tick()
  StalenessTracker tracker_;               // under tickMu_
  struct Identity {
    std::string host;
    long pid = 0;
    std::string process;  // localProcessId() of the member ("" when not published)
  };
  std::map<int, Identity> identity_;  // by rank; under tickMu_

  std::mutex groupsMu_;  // guards groups_ and nextId_; held while callbacks run
  std::map<uint64_t, Group> groups_;
  uint64_t nextId_ = 0;

  std::mutex stopMu_;
  std::condition_variable stopCv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace ds::comm::nccl_impl
