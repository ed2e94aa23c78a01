// NcclWork: a Work completed by a CUDA event recorded on the group's stream after the kernel.
// wait() polls the event, the group's abort state and the communicator's async error until the
// timeout. A failure names its cause: the watchdog's abort names the dead peer; a NCCL error
// first gives the watchdog a grace period to name one; a timeout aborts the communicator, so a
// dead peer can never hang the waiter.
#pragma once

#include <cuda_runtime.h>

#include <chrono>
#include <memory>

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

  // With the comm's lock held: true once settled (completes the Work if the event fired).
  bool pollLocked();
  // With the comm's lock held: completes the Work if its event fired, else fails it.
  void settleLocked(std::exception_ptr reason);

 private:
  cudaEvent_t event_ = nullptr;
  std::shared_ptr<NcclComm> comm_;
  std::chrono::milliseconds grace_;
};

}  // namespace ds::comm::nccl_impl
