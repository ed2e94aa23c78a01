// SerialWorker: one thread that runs a group's collectives in issue order, completing or failing
// each Work. Not a pool: one group, one thread, so every member starts its collectives in the
// order they were issued (the contract every backend relies on).
// Thread-safe submit(); the destructor runs what is still queued, then joins. Used by the gloo and
// mpi backends (gloo's watchdog polls runningFor()).
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "comm/work.h"

namespace ds::comm {

class SerialWorker {
 public:
  SerialWorker();
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
  void loop();

  struct Task {
    WorkPtr work;
    std::function<void()> fn;
  };
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> queue_;
  bool running_ = false;
  std::chrono::steady_clock::time_point startedAt_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace ds::comm
