// Work: completion flag plus stored failure, guarded by one mutex; wait() rethrows the failure.
#include "comm/work.h"

#include "core/env.h"
#include "core/error.h"

namespace ds::comm {

void Work::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, timeout, [&] { return done_; })) {
    throw TimeoutError(
        fmt::format("{} did not complete within {} ms (DS_TIMEOUT)", what_, timeout.count()));
  }
  if (error_) std::rethrow_exception(error_);
}

void Work::wait() { wait(defaultTimeout()); }

bool Work::isCompleted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

void Work::markCompleted() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
}

void Work::markFailed(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    error_ = std::move(error);
    done_ = true;
  }
  cv_.notify_all();
}

WorkPtr completedWork(std::string what) {
  auto w = std::make_shared<Work>(std::move(what));
  w->markCompleted();
  return w;
}

}  // namespace ds::comm
