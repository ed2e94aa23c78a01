// SerialWorker: one thread that runs a group's collectives in issue order, completing or failing
// each Work. Not a pool: one group, one thread of execution at a time, so every member starts its
// collectives in the order they were issued (the contract every backend relies on).
// The common "issue, then wait at once" runs on the waiting thread with no thread handoff and no
// wakeup of the worker thread (see the constructor); the worker starts what nobody waits for.
// Thread-safe submit(); the destructor runs what is still queued, then joins. Used by the gloo and
// mpi backends (gloo's watchdog polls runningFor()) and the shm layers over them.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "comm/work.h"

namespace ds::comm {

class SerialWorker {
 public:
  // How long a task submitted to an idle queue is left for its issuer's wait() before the worker
  // thread starts it (the start delay of a collective nobody waits for).
  static constexpr std::chrono::microseconds kDefaultWaiterGrace{1000};
  // How long the worker keeps polling after the last submit before it sleeps until woken (a
  // wakeup per collective costs little once collectives are this far apart).
  static constexpr std::chrono::milliseconds kParkAfter{5};
  // In waiter mode (see serial_worker.cc) the worker looks for tasks nobody waits for this often.
  static constexpr std::chrono::milliseconds kWaiterModePoll{50};

  // waiterRunsAfter: a wait() with at least this timeout on a queued task that is next in line,
  // while no task runs, runs the task on the waiting thread instead of handing it to the worker
  // thread and back (a task cannot honour a shorter wait timeout once running, so shorter waits
  // let the worker start it and just wait). max() (the default) turns this off: the worker then
  // starts every task at once.
  // waiterGrace: with waiterRunsAfter on, a task submitted while the queue is idle is left to its
  // waiter for this long; only then does the worker thread start it. While tasks keep coming the
  // worker polls (every grace period, doubling up to 8 ms while polls find nothing to do)
  // instead of being woken by each submit; after kParkAfter without a submit it sleeps until the
  // next one. A second submit, or a waiter that cannot run the head itself (not next in line, or
  // a short timeout), ends the grace at once. A task nobody waits for thus starts at most
  // ~8 ms + grace late (grace when the worker is parked); in waiter mode (after many tasks in a
  // row waited for at once) up to kWaiterModePoll late, once, before the normal mode returns.
  explicit SerialWorker(
      std::chrono::milliseconds waiterRunsAfter = std::chrono::milliseconds::max(),
      std::chrono::microseconds waiterGrace = kDefaultWaiterGrace);
  ~SerialWorker();
  SerialWorker(const SerialWorker&) = delete;
  SerialWorker& operator=(const SerialWorker&) = delete;

  // Queues fn; the returned Work completes when fn returns and fails with what it throws.
  WorkPtr submit(std::string what, std::function<void()> fn);
  // Queues a task that starts a collective on another backend (`issue`) and waits up to
  // `timeout` for it: so it starts only after everything queued before it, and a layer over two
  // transports (comm/shm) keeps one issue order across them.
  WorkPtr submitIssue(std::string what, std::function<WorkPtr()> issue,
                      std::chrono::milliseconds timeout);
  // Returns once every task queued before the call has run (throws TimeoutError past timeout).
  void drain(std::chrono::milliseconds timeout);
  // Whether tasks are queued or running.
  bool busy() const;
  // How long the running task has been running (zero when idle): a backend's watchdog uses it.
  std::chrono::milliseconds runningFor() const;

  // Counters (tests, diagnostics): tasks run by waiting threads, tasks run by the worker thread,
  // and how often the worker thread has woken from a wait (timeouts and notifications).
  struct Stats {
    uint64_t ranByWaiters = 0;
    uint64_t ranByWorker = 0;
    uint64_t workerWakeups = 0;
    bool waiterMode = false;  // see serial_worker.cc
  };
  Stats stats() const;

 private:
  struct Queue;
  class TaskWork;
  void loop();

  std::shared_ptr<Queue> q_;
  std::thread thread_;
};

}  // namespace ds::comm
