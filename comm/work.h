// Work: the handle of one asynchronous collective. wait() blocks until it completes (or the
// timeout passes) and rethrows the collective's failure. Thread-safe; shared between the issuing
// thread and the backend's worker.
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <string>

namespace ds::comm {

class Work {
 public:
  explicit Work(std::string what) : what_(std::move(what)) {}
  virtual ~Work() = default;

  // Blocks until completion; rethrows the stored failure. TimeoutError names the collective.
  virtual void wait(std::chrono::milliseconds timeout);
  void wait();  // with ds::defaultTimeout()
  bool isCompleted() const;
  // A CUDA event (cudaEvent_t) recorded on the collective's stream after it, for a device stream
  // to wait on instead of the host (wait() must still follow: it reports failures); null where
  // the Work completes on the host (gloo, mpi, staged device buffers).
  virtual const void* deviceEvent() const { return nullptr; }

  // Called once by the backend.
  void markCompleted();
  void markFailed(std::exception_ptr error);

  const std::string& what() const { return what_; }

 private:
  std::string what_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr error_;
};

using WorkPtr = std::shared_ptr<Work>;

// A Work already completed (synchronous paths).
WorkPtr completedWork(std::string what);

}  // namespace ds::comm
