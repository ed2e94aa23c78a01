// NcclWork: a Work completed by a CUDA event recorded on the group's stream after the kernel.
// wait() polls the event, the group's abort state and the communicator's async error until the
// timeout. A failure names its cause: the watchdog's abort names the dead peer; a NCCL error
// first gives the watchdog a grace period to name one; a timeout aborts the communicator, so a
// dead peer can never hang the waiter.
#pragma once

#include <cuda_runtime.h>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>

#include "comm/nccl/nccl_comm.h"
#include "comm/work.h"

namespace ds::comm::nccl_impl {

class NcclWork final : public Work {
 public:
  // Records the event on `stream`. `grace`: how long a NCCL async error waits for the watchdog
  // to name a dead peer before the communicator is aborted anonymously.
  NcclWork(std::string what, cudaStream_t stream, std::shared_ptr<NcclComm> comm,
           std::chrono::milliseconds grace);
  ~NcclWork() override;
  void wait(std::chrono::milliseconds timeout) override;
  const void* deviceEvent() const override { return event_; }

  // With the comm's lock held: true once settled (completes the Work if the event fired).
  bool pollLocked();
  // With the comm's lock held: completes the Work if its event fired, else fails it.
  void settleLocked(std::exception_ptr reason);

 private:
  cudaEvent_t event_ = nullptr;
  std::shared_ptr<NcclComm> comm_;
  std::chrono::milliseconds grace_;
};

// A send or recv waiting to be enqueued. NCCL runs ungrouped point-to-point calls in stream
// order, so a recv posted before a send would block the send behind it (and every rank of a ring
// would wait on its recv): the backend queues p2p calls and enqueues them as one ncclGroup when
// one of them is first waited, or before the next collective. wait() first flushes (through
// `flush`, which does nothing once the backend is gone), then waits on the group's NcclWork.
class NcclDeferredWork final : public Work {
 public:
  NcclDeferredWork(std::string what, std::weak_ptr<std::function<void()>> flush)
      : Work(std::move(what)), flush_(std::move(flush)) {}
  void wait(std::chrono::milliseconds timeout) override;
  // Called by the flush: the Work that completes this one.
  void bind(WorkPtr real);

 private:
  std::weak_ptr<std::function<void()>> flush_;
  std::mutex mu_;
  WorkPtr real_;
};

}  // namespace ds::comm::nccl_impl
