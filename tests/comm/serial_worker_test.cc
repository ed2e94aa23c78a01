// SerialWorker: tasks run one at a time in issue order; a waiter with a long enough timeout runs
// the task it waits for itself when that task is next in line and nothing runs; a shorter wait
// never does; failures are rethrown by wait() either way. Issue-then-wait neither wakes the worker
// thread per task nor hands the task to it; a task nobody waits for still starts after the grace;
// a second submit, or a waiter that cannot take the head, ends the head's grace; waiter mode
// (after many tasks waited for at once) still starts an unwaited task, then leaves the mode;
// submitIssue starts another worker's task only in its turn and drain() waits for the queue.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "comm/serial_worker.h"

using namespace ds::comm;
using namespace std::chrono_literals;

namespace {

// Submits a task and never waits for it: the worker thread must start it. The task signals a
// promise; the 10 s on its future only guards against a hang.
void runUnwaitedOnWorker(SerialWorker& w) {
  std::promise<std::thread::id> ranOn;
  auto ran = ranOn.get_future();
  auto t = w.submit("unwaited", [&] { ranOn.set_value(std::this_thread::get_id()); });
  REQUIRE(ran.wait_for(10s) == std::future_status::ready);
  CHECK(ran.get() != std::this_thread::get_id());
  t->wait(10s);  // completed (or about to): returns without running anything
  CHECK(t->isCompleted());
}

}  // namespace

TEST_CASE("serial worker: issue order and mutual exclusion, with waiters running tasks", "[unit]") {
  SerialWorker w(1s);
  std::vector<int> order;
  std::atomic<int> inside{0};
  bool overlapped = false;
  std::vector<WorkPtr> works;
  for (int i = 0; i < 200; ++i) {
    works.push_back(w.submit("t", [&, i] {
      if (inside.fetch_add(1) != 0) overlapped = true;
      order.push_back(i);
      inside.fetch_sub(1);
    }));
    if (i % 3 == 0) works.back()->wait(10s);  // sometimes the waiter runs it
  }
  for (auto& wk : works) wk->wait(10s);
  CHECK_FALSE(overlapped);
  REQUIRE(order.size() == 200);
  for (int i = 0; i < 200; ++i) CHECK(order[i] == i);
}

TEST_CASE("serial worker: while another task runs a waiter only waits (and may time out)",
          "[unit]") {
  SerialWorker w(5s);
  // Hold the worker thread (a latch, not a timed spin) so the next task stays queued until the
  // waiter decides.
  std::promise<void> release;
  auto released = release.get_future().share();
  auto blocker = w.submit("block", [released] { released.wait(); });
  std::thread::id ranOn;
  auto next = w.submit("next", [&] { ranOn = std::this_thread::get_id(); });
  // The worker is busy: a waiter must not run `next` (it is not alone); a short wait times out.
  CHECK_THROWS_WITH(next->wait(20ms), Catch::Contains("next") && Catch::Contains("20 ms"));
  release.set_value();
  blocker->wait(10s);
  next->wait(10s);
  CHECK(ranOn != std::thread::id());

  // Idle worker thread parked on its condition variable: a 10 s wait (>= 5 s) may take the task
  // before the worker wakes; whichever runs it, it runs once and the result is visible.
  std::atomic<int> runs{0};
  auto third = w.submit("third", [&] { runs++; });
  third->wait(10s);
  CHECK(runs == 1);
}

TEST_CASE("serial worker: a task's failure is rethrown by wait()", "[unit]") {
  SerialWorker w(1s);
  auto bad = w.submit("bad", [] { throw std::runtime_error("boom from the task"); });
  CHECK_THROWS_WITH(bad->wait(10s), Catch::Contains("boom from the task"));
  auto good = w.submit("good", [] {});
  good->wait(10s);
  CHECK(good->isCompleted());
}

TEST_CASE("serial worker: issue then wait runs on the caller and does not wake the worker",
          "[unit]") {
  // A grace far longer than the test: only a waiter (or a notify) can start these tasks.
  SerialWorker w(1s, std::chrono::hours(1));
  const auto me = std::this_thread::get_id();
  int onCaller = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 500; ++i) {
    w.submit("t", [&] { onCaller += std::this_thread::get_id() == me; })->wait(10s);
  }
  // In waiter mode (after 64 such tasks) the worker looks once per kWaiterModePoll.
  const auto looks = (std::chrono::steady_clock::now() - t0) / SerialWorker::kWaiterModePoll;
  CHECK(onCaller == 500);
  SerialWorker::Stats s = w.stats();
  CHECK(s.ranByWaiters == 500);
  CHECK(s.ranByWorker == 0);
  // One wakeup for the first submit (the worker was parked), then it sleeps until the first
  // task's grace ends; the old worker woke once or twice per task.
  CHECK(s.workerWakeups <= 3 + uint64_t(looks) + 1);
}

TEST_CASE("serial worker: a task nobody waits for starts on the worker after the grace", "[unit]") {
  SerialWorker w(1s, 1ms);
  auto runUnwaited = [&] { runUnwaitedOnWorker(w); };
  runUnwaited();  // the worker was parked: woken by the submit, starts it when the grace ends
  runUnwaited();  // usually still polling (a submit within kParkAfter): found by its poll
  std::this_thread::sleep_for(SerialWorker::kParkAfter * 3);
  runUnwaited();  // parked again after kParkAfter without submits
  CHECK(w.stats().ranByWorker == 3);
}

TEST_CASE("serial worker: a second submit, or a waiter that cannot take the head, ends its grace",
          "[unit]") {
  SerialWorker w(5s, std::chrono::hours(1));
  std::vector<int> order;
  auto a = w.submit("a", [&] { order.push_back(1); });
  // Nobody waited for a before b was issued: the worker must start a now (not in 1 h).
  auto b = w.submit("b", [&] { order.push_back(2); });
  b->wait(10s);
  CHECK(a->isCompleted());
  REQUIRE(order == std::vector<int>{1, 2});

  // A wait shorter than waiterRunsAfter never runs the task itself, but does not strand it.
  std::thread::id ranOn;
  auto c = w.submit("c", [&] { ranOn = std::this_thread::get_id(); });
  c->wait(3s);
  CHECK(ranOn != std::this_thread::get_id());
  CHECK(w.stats().ranByWaiters == 0);
}

TEST_CASE("serial worker: waiter mode still starts a task nobody waits for, then leaves",
          "[unit]") {
  SerialWorker w(1s, 1ms);
  // Waiter mode takes 64 tasks in a row each waited for within 100 us of its submit; a waiter
  // preempted for longer (a loaded machine, sanitizers) starts the count again, and one late by
  // more than the grace leaves its task to the worker. So issue-then-wait until the mode is on,
  // with room for many such restarts, and count the worker's tasks from there.
  for (int i = 0; i < 5000 && !w.stats().waiterMode; ++i) w.submit("t", [] {})->wait(10s);
  REQUIRE(w.stats().waiterMode);
  // Idle in waiter mode: one look per kWaiterModePoll, not one per millisecond.
  const uint64_t before = w.stats().workerWakeups;
  const auto t0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(SerialWorker::kWaiterModePoll * 4);
  const auto looks = (std::chrono::steady_clock::now() - t0) / SerialWorker::kWaiterModePoll;
  CHECK(w.stats().workerWakeups - before <= uint64_t(looks) + 2);
  // A task nobody waits for is still started by the worker (found by its next look).
  const uint64_t byWorker = w.stats().ranByWorker;
  runUnwaitedOnWorker(w);
  CHECK_FALSE(w.stats().waiterMode);  // back to the grace-period polling
  CHECK(w.stats().ranByWorker == byWorker + 1);
}

TEST_CASE("serial worker: the destructor runs tasks still left to their waiters", "[unit]") {
  std::atomic<int> runs{0};
  {
    SerialWorker w(1s, std::chrono::hours(1));
    w.submit("left", [&] { runs++; });
    w.submit("behind", [&] { runs++; });
  }
  CHECK(runs == 2);
}

TEST_CASE("serial worker: without waiterRunsAfter the worker starts every task at once", "[unit]") {
  SerialWorker w;  // max(): no waiter runs, no grace
  std::vector<WorkPtr> works;
  std::atomic<int> runs{0};
  for (int i = 0; i < 50; ++i) works.push_back(w.submit("t", [&] { runs++; }));
  for (auto& wk : works) wk->wait(10s);  // a waiter never runs a task here: it only waits
  CHECK(runs == 50);
  CHECK(w.stats().ranByWaiters == 0);
  CHECK(w.stats().ranByWorker == 50);
}

TEST_CASE("serial worker: the worker does not poll through a long task a waiter runs", "[unit]") {
  SerialWorker w(1s, 1ms);
  std::thread::id ranOn;
  auto work = w.submit("long", [&] {
    ranOn = std::this_thread::get_id();
    std::this_thread::sleep_for(300ms);
  });
  work->wait(10s);
  CHECK(ranOn == std::this_thread::get_id());
  // Polling at the 1 ms grace would be ~300 wakeups; it polls once, then sleeps until the end.
  CHECK(w.stats().workerWakeups <= 8);
}

TEST_CASE("serial worker: submitIssue starts another transport's work in turn; drain waits",
          "[unit]") {
  SerialWorker w(1s, 1ms), other;
  std::promise<void> release;
  auto released = release.get_future().share();
  std::vector<int> order;
  std::mutex mu;
  auto note = [&](int v) {
    std::lock_guard<std::mutex> lock(mu);
    order.push_back(v);
  };
  auto first = w.submit("first", [&, released] {
    released.wait();
    note(1);
  });
  // Issued on `other` only once `first` is done, and waited for there.
  auto second = w.submitIssue(
      "second", [&] { return other.submit("on other", [&] { note(2); }); }, 10s);
  std::thread later([&] {
    w.drain(10s);
    note(3);
  });
  std::this_thread::sleep_for(20ms);  // nothing may have run yet, whatever the timing
  {
    std::lock_guard<std::mutex> lock(mu);
    CHECK(order.empty());
  }
  release.set_value();
  second->wait(10s);
  later.join();
  first->wait(10s);
  CHECK(order == std::vector<int>{1, 2, 3});
  // A failure of the issued work fails the task.
  auto bad = w.submitIssue(
      "bad", [&] { return other.submit("boom", [] { throw std::runtime_error("boom there"); }); },
      10s);
  CHECK_THROWS_WITH(bad->wait(10s), Catch::Contains("boom there"));
}
