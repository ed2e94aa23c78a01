// SerialWorker: tasks run one at a time in issue order; a waiter with a long enough timeout runs
// the task it waits for itself when that task is next in line and nothing runs; a shorter wait
// never does; failures are rethrown by wait() either way.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "comm/serial_worker.h"

using namespace ds::comm;
using namespace std::chrono_literals;

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
  // Hold the worker thread so the next task stays queued until the waiter decides.
  std::atomic<bool> release{false};
  auto blocker = w.submit("block", [&] {
    while (!release) std::this_thread::sleep_for(1ms);
  });
  std::thread::id ranOn;
  auto next = w.submit("next", [&] { ranOn = std::this_thread::get_id(); });
  // The worker is busy: a waiter must not run `next` (it is not alone); a short wait times out.
  CHECK_THROWS_WITH(next->wait(20ms), Catch::Contains("next") && Catch::Contains("20 ms"));
  release = true;
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
