// SerialWorker: a deque under a mutex; tasks run outside the lock, one at a time, on the worker
// thread or on a thread waiting for the task at the head of the queue (TaskWork::wait).
#include "comm/serial_worker.h"

namespace ds::comm {

struct SerialWorker::Queue {
  struct Task {
    std::shared_ptr<Work> work;
    std::function<void()> fn;
  };
  std::chrono::milliseconds waiterRunsAfter;
  std::mutex mu;
  std::condition_variable cv;  // the worker: a task to start, or stop
  std::deque<Task> tasks;
  bool running = false;
  std::chrono::steady_clock::time_point startedAt;
  bool stop = false;

  // Pops the head; the caller holds mu and has checked that nothing runs.
  Task start() {
    Task t = std::move(tasks.front());
    tasks.pop_front();
    running = true;
    startedAt = std::chrono::steady_clock::now();
    return t;
  }
  // Runs t outside the lock, then marks the queue idle and wakes the worker.
  void finish(Task& t) {
    try {
      t.fn();
      t.work->markCompleted();
    } catch (...) {
      t.work->markFailed(std::current_exception());
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      running = false;
    }
    cv.notify_all();
  }
};

class SerialWorker::TaskWork final : public Work {
 public:
  TaskWork(std::string what, std::weak_ptr<Queue> q) : Work(std::move(what)), q_(std::move(q)) {}

  void wait(std::chrono::milliseconds timeout) override {
    if (auto q = q_.lock(); q && !isCompleted() && timeout >= q->waiterRunsAfter) {
      std::unique_lock<std::mutex> lock(q->mu);
      if (!q->running && !q->tasks.empty() && q->tasks.front().work.get() == this) {
        Queue::Task t = q->start();
        lock.unlock();
        q->finish(t);
      }
    }
    Work::wait(timeout);
  }

 private:
  std::weak_ptr<Queue> q_;
};

SerialWorker::SerialWorker(std::chrono::milliseconds waiterRunsAfter)
    : q_(std::make_shared<Queue>()) {
  q_->waiterRunsAfter = waiterRunsAfter;
  thread_ = std::thread([this] { loop(); });
}

SerialWorker::~SerialWorker() {
  {
    std::lock_guard<std::mutex> lock(q_->mu);
    q_->stop = true;
  }
  q_->cv.notify_all();
  thread_.join();
}

WorkPtr SerialWorker::submit(std::string what, std::function<void()> fn) {
  auto work = std::make_shared<TaskWork>(std::move(what), q_);
  {
    std::lock_guard<std::mutex> lock(q_->mu);
    q_->tasks.push_back(Queue::Task{work, std::move(fn)});
  }
  q_->cv.notify_all();
  return work;
}

bool SerialWorker::busy() const {
  std::lock_guard<std::mutex> lock(q_->mu);
  return q_->running || !q_->tasks.empty();
}

std::chrono::milliseconds SerialWorker::runningFor() const {
  std::lock_guard<std::mutex> lock(q_->mu);
  if (!q_->running) return std::chrono::milliseconds(0);
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               q_->startedAt);
}

void SerialWorker::loop() {
  Queue& q = *q_;
  for (;;) {
    Queue::Task task;
    {
      std::unique_lock<std::mutex> lock(q.mu);
      q.cv.wait(lock, [&] { return (q.stop && !q.running) || (!q.tasks.empty() && !q.running); });
      if (q.tasks.empty()) return;  // stopping and drained
      task = q.start();
    }
    q.finish(task);
  }
}

}  // namespace ds::comm
