// SerialWorker: a deque under a mutex; tasks run outside the lock, one at a time.
#include "comm/serial_worker.h"

namespace ds::comm {

SerialWorker::SerialWorker() : thread_([this] { loop(); }) {}

SerialWorker::~SerialWorker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

WorkPtr SerialWorker::submit(std::string what, std::function<void()> fn) {
  auto work = std::make_shared<Work>(std::move(what));
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(Task{work, std::move(fn)});
  }
  cv_.notify_all();
  return work;
}

bool SerialWorker::busy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return running_ || !queue_.empty();
}

std::chrono::milliseconds SerialWorker::runningFor() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!running_) return std::chrono::milliseconds(0);
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               startedAt_);
}

void SerialWorker::loop() {
  for (;;) {
    Task task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      task = std::move(queue_.front());
      queue_.pop_front();
      running_ = true;
      startedAt_ = std::chrono::steady_clock::now();
    }
    try {
      task.fn();
      task.work->markCompleted();
    } catch (...) {
      task.work->markFailed(std::current_exception());
    }
    std::lock_guard<std::mutex> lock(mu_);
    running_ = false;
  }
}

}  // namespace ds::comm
