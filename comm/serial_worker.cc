// SerialWorker: a deque under a mutex; tasks run outside the lock, one at a time, on the worker
// thread or on a thread waiting for the task at the head of the queue (TaskWork::wait). The worker
// thread is notified only when it has to act and is not already polling: a submit while it is
// parked, a task that no waiter may take, a queue left non-empty by a waiter's task, stop.
// Waiter mode: once kWaiterModeAfter tasks in a row were taken by their waiter within
// kImmediateWait of their submit (issue, then wait at once), the worker stops polling at the
// grace and is no longer woken by submits; it looks every kWaiterModePoll instead. A task nobody
// waits for is then found by that look (or by the issuer's next submit or wait), and the worker
// is back in the normal mode for the tasks after it. Its polls and wakeups otherwise cost 10-20%
// of a 1 MiB collective with 4 busy-polling MPI ranks on 2 vCPUs (docs/comm.md).
#include "comm/serial_worker.h"

namespace ds::comm {
namespace {
using Clock = std::chrono::steady_clock;
constexpr std::chrono::microseconds kMaxPoll{8000};
constexpr std::chrono::microseconds kImmediateWait{100};
constexpr int kWaiterModeAfter = 64;
}  // namespace

struct SerialWorker::Queue {
  struct Task {
    std::shared_ptr<Work> work;
    std::function<void()> fn;
    Clock::time_point queuedAt;
    bool leftToWaiter = false;  // submitted to an idle queue: its waiter may run it within grace
  };
  std::chrono::milliseconds waiterRunsAfter;
  std::chrono::microseconds grace;
  mutable std::mutex mu;
  std::condition_variable cv;  // the worker: a task to start, or stop
  std::deque<Task> tasks;
  bool running = false;
  Clock::time_point startedAt;
  Clock::time_point lastSubmit;
  bool parked = true;      // the worker sleeps without a timeout: only a notify makes it look
  bool awaitsRun = false;  // the worker sleeps until the task a waiter runs has finished
  int immediateRuns = 0;   // tasks in a row a waiter took within kImmediateWait of their submit
  bool stop = false;
  Stats stats;

  bool waiterMode() const { return immediateRuns >= kWaiterModeAfter; }

  // Whether idle-queue tasks are left to their waiters (and the worker polls while busy).
  bool defers() const {
    return waiterRunsAfter != std::chrono::milliseconds::max() &&
           grace > std::chrono::microseconds::zero();
  }

  // Pops the head; the caller holds mu and has checked that nothing runs.
  Task start() {
    Task t = std::move(tasks.front());
    tasks.pop_front();
    running = true;
    startedAt = Clock::now();
    return t;
  }

  // Runs t outside the lock. The queue is marked idle before t's Work completes, so a waiter that
  // returns and issues its next collective at once finds an idle queue and runs that one too.
  void run(Task& t, bool byWorker) {
    std::exception_ptr error;
    try {
      t.fn();
    } catch (...) {
      error = std::current_exception();
    }
    bool wake = false;
    {
      std::lock_guard<std::mutex> lock(mu);
      running = false;
      ++(byWorker ? stats.ranByWorker : stats.ranByWaiters);
      wake = !byWorker && (!tasks.empty() || stop || awaitsRun);  // a worker loops on by itself
    }
    if (wake) cv.notify_all();
    if (error) {
      t.work->markFailed(error);
    } else {
      t.work->markCompleted();
    }
  }
};

class SerialWorker::TaskWork final : public Work {
 public:
  TaskWork(std::string what, std::weak_ptr<Queue> q) : Work(std::move(what)), q_(std::move(q)) {}

  void wait(std::chrono::milliseconds timeout) override {
    if (auto q = q_.lock(); q && !isCompleted()) {
      std::unique_lock<std::mutex> lock(q->mu);
      if (!q->running && !q->tasks.empty()) {
        Queue::Task& head = q->tasks.front();
        if (head.work.get() == this && timeout >= q->waiterRunsAfter) {
          const bool immediate = Clock::now() - head.queuedAt <= kImmediateWait;
          q->immediateRuns = immediate ? std::min(q->immediateRuns + 1, kWaiterModeAfter) : 0;
          Queue::Task t = q->start();
          lock.unlock();
          q->run(t, false);
        } else if (head.leftToWaiter) {
          // Whoever waits for the head is not here (or cannot run it): start it now.
          head.leftToWaiter = false;
          lock.unlock();
          q->cv.notify_all();
        }
      }
    }
    Work::wait(timeout);
  }

 private:
  std::weak_ptr<Queue> q_;
};

SerialWorker::SerialWorker(std::chrono::milliseconds waiterRunsAfter,
                           std::chrono::microseconds waiterGrace)
    : q_(std::make_shared<Queue>()) {
  q_->waiterRunsAfter = waiterRunsAfter;
  q_->grace = waiterGrace;
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
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(q_->mu);
    Clock::time_point now = Clock::now();
    bool idle = !q_->running && q_->tasks.empty();
    bool leftToWaiter = idle && q_->defers();
    // A submit behind a head still left to its waiter: that issuer did not wait, start it now.
    bool endGrace = !q_->running && !q_->tasks.empty() && q_->tasks.front().leftToWaiter;
    if (endGrace) q_->tasks.front().leftToWaiter = false;
    q_->tasks.push_back(Queue::Task{work, std::move(fn), now, leftToWaiter});
    q_->lastSubmit = now;
    // Behind a running or queued task it is started by whoever finishes that one; a task left
    // to its waiter is found by the worker's poll unless the worker is parked.
    wake = (q_->parked && !q_->waiterMode()) || (idle && !leftToWaiter) || endGrace;
  }
  if (wake) q_->cv.notify_all();
  return work;
}

WorkPtr SerialWorker::submitIssue(std::string what, std::function<WorkPtr()> issue,
                                  std::chrono::milliseconds timeout) {
  return submit(std::move(what), [issue = std::move(issue), timeout] { issue()->wait(timeout); });
}

void SerialWorker::drain(std::chrono::milliseconds timeout) {
  submit("queue drain", [] {})->wait(timeout);
}

bool SerialWorker::busy() const {
  std::lock_guard<std::mutex> lock(q_->mu);
  return q_->running || !q_->tasks.empty();
}

std::chrono::milliseconds SerialWorker::runningFor() const {
  std::lock_guard<std::mutex> lock(q_->mu);
  if (!q_->running) return std::chrono::milliseconds(0);
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - q_->startedAt);
}

SerialWorker::Stats SerialWorker::stats() const {
  std::lock_guard<std::mutex> lock(q_->mu);
  Stats s = q_->stats;
  s.waiterMode = q_->waiterMode();
  return s;
}

void SerialWorker::loop() {
  Queue& q = *q_;
  std::unique_lock<std::mutex> lock(q.mu);
  bool polledDuringRun = false;  // the last poll found a task running (run by a waiter)
  std::chrono::microseconds poll = q.grace;
  for (;;) {
    if (!q.running) polledDuringRun = false;
    if (!q.running && !q.tasks.empty()) {
      Clock::time_point due = q.tasks.front().queuedAt + q.grace;
      if (!q.tasks.front().leftToWaiter || q.stop || Clock::now() >= due) {
        poll = q.grace;  // tasks for the worker: poll at the grace period again
        if (q.tasks.front().leftToWaiter) q.immediateRuns = 0;  // nobody waited: normal mode
        Queue::Task t = q.start();
        lock.unlock();
        q.run(t, true);
        lock.lock();
        continue;
      }
      q.parked = false;
      q.cv.wait_until(lock, due);
    } else if (q.stop && !q.running) {
      return;  // stopping and drained
    } else if (q.defers() && q.waiterMode()) {
      q.parked = false;  // not woken by submits: look now and then for a task nobody waits for
      q.cv.wait_for(lock, kWaiterModePoll);
    } else if (q.running && polledDuringRun) {
      // A waiter's task outlasted one poll: rather than poll through a long collective, sleep
      // until it ends (one notify then; short tasks end between polls and need none).
      q.awaitsRun = true;
      q.cv.wait(lock);
      q.awaitsRun = false;
    } else if (q.defers() && Clock::now() - q.lastSubmit < kParkAfter) {
      q.parked = false;  // submits keep coming: poll rather than be woken by each
      polledDuringRun = q.running;
      q.cv.wait_for(lock, poll);
      poll = std::min(poll * 2, kMaxPoll);  // polls that find nothing to do grow sparser
    } else {
      q.parked = true;
      q.cv.wait(lock);
    }
    ++q.stats.workerWakeups;
  }
}

}  // namespace ds::comm
