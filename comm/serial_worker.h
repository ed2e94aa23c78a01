// SerialWorker: one thread that runs a group's collectives in issue order, completing or failing
// each Work. Not a pool: one group, one thread of execution at a time, so every member starts its
// collectives in the order they were issued (the contract every backend relies on).
// A thread waiting on a task that is next in line while nothing runs may run it itself (see the
// constructor): same order, same exclusion, two thread handoffs fewer per blocking collective.
// Thread-safe submit(); the destructor runs what is still queued, then joins. Used by the gloo and
// mpi backends (gloo's watchdog polls runningFor()).
#pragma once

#include <chrono>
#include <condition_variable>
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
  // waiterRunsAfter: a wait() with at least this timeout on a queued task that is next in line,
  // while no task runs, runs the task on the waiting thread instead of handing it to the worker
  // thread and back (a task cannot honour a shorter wait timeout once running, so shorter waits
  // just wait). max() (the default) turns this off.
  explicit SerialWorker(
      std::chrono::milliseconds waiterRunsAfter = std::chrono::milliseconds::max());
  ~SerialWorker();
  SerialWorker(const SerialWorker&) = delete;
  SerialWorker& operator=(const SerialWorker&) = delete;

  // Queues fn; the returned Work completes when fn returns and fails with what it throws.
  WorkPtr submit(std::string what, std::function<void()> fn);
  // Whether tasks are queued or running.
  bool busy() const;
  // How long the running task has been running (zero when idle): a backend's watchdog uses it.
  std::chrono::milliseconds runningFor() const;

 private:
  struct Queue;
  class TaskWork;
  void loop();

  std::shared_ptr<Queue> q_;
  std::thread thread_;
};

}  // namespace ds::comm
