// NcclWork: event record at construction; a polling wait that settles through the group's
// NcclComm, so a Work is never completed with data from an aborted communicator.
#include "comm/nccl/nccl_work.h"

#include <thread>

#include "comm/nccl/nccl_check.h"

namespace ds::comm::nccl_impl {

NcclWork::NcclWork(std::string what, cudaStream_t stream, std::shared_ptr<NcclComm> comm,
                   std::chrono::milliseconds grace)
    : Work(std::move(what)), comm_(std::move(comm)), grace_(grace) {
  cudaCheck(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming), "cudaEventCreate");
  cudaCheck(cudaEventRecord(event_, stream), "cudaEventRecord");
}

NcclWork::~NcclWork() {
  if (event_) cudaEventDestroy(event_);
}

bool NcclWork::pollLocked() {
  if (isCompleted()) return true;
  cudaError_t q = cudaEventQuery(event_);
  if (q == cudaErrorNotReady) return false;
  if (q == cudaSuccess) {
    markCompleted();
  } else {
    markFailed(
        std::make_exception_ptr(CommError(fmt::format("{}: {}", what(), cudaGetErrorString(q)))));
  }
  return true;
}

void NcclWork::settleLocked(std::exception_ptr reason) {
  if (pollLocked()) return;
  markFailed(std::move(reason));
}

void NcclWork::wait(std::chrono::milliseconds timeout) {
  auto start = std::chrono::steady_clock::now();
  auto deadline = start + timeout;
  std::chrono::steady_clock::time_point asyncSince{};
  while (!isCompleted()) {
    {
      std::lock_guard<std::mutex> lock(comm_->mu());
      if (comm_->aborted()) {
        settleLocked(comm_->reason());
        break;
      }
      if (pollLocked()) break;
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm_->get(), &async);
      auto now = std::chrono::steady_clock::now();
      if (async != ncclSuccess && async != ncclInProgress) {
        // NCCL saw a peer fail; give the liveness watchdog the chance to say which one.
        if (asyncSince == std::chrono::steady_clock::time_point{}) asyncSince = now;
        if (now - asyncSince > grace_) {
          comm_->abortLocked(std::make_exception_ptr(CommError(fmt::format(
              "{}: NCCL reported {} (a peer failed or left; no member's heartbeat went stale "
              "within {} ms); communicator aborted",
              what(), ncclGetErrorString(async), grace_.count()))));
        }
      }
      if (now > deadline) {
        comm_->abortLocked(std::make_exception_ptr(TimeoutError(
            fmt::format("{} did not complete within {} ms (DS_TIMEOUT); communicator aborted",
                        what(), timeout.count()))));
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  Work::wait(timeout);
}

void NcclDeferredWork::bind(WorkPtr real) {
  std::lock_guard<std::mutex> lock(mu_);
  real_ = std::move(real);
}

void NcclDeferredWork::wait(std::chrono::milliseconds timeout) {
  WorkPtr real;
  {
    std::lock_guard<std::mutex> lock(mu_);
    real = real_;
  }
  if (!real) {
    if (auto flush = flush_.lock()) (*flush)();
    std::lock_guard<std::mutex> lock(mu_);
    real = real_;
  }
  if (!isCompleted()) {
    if (!real) {
      markFailed(std::make_exception_ptr(
          CommError(fmt::format("{}: never enqueued (its group was destroyed first)", what()))));
    } else {
      try {
        real->wait(timeout);
        markCompleted();
      } catch (...) {  // a timeout too: NcclWork has aborted the communicator by then
        markFailed(std::current_exception());
      }
    }
  }
  Work::wait(timeout);
}

}  // namespace ds::comm::nccl_impl
