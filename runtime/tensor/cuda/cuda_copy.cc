// CudaOps' asynchronous copies (ops.h): page-locked host memory (cudaHostAlloc), copies on the
// non-blocking copy stream, CUDA events between the two streams and host waits that poll with a
// deadline (cudaEventSynchronize has none). Not the synchronous upload/download (cuda_ops.cc).
// Invariant: a CudaEvent is only ever recorded on this device's streams.
#include <fmt/format.h>

#include <thread>

#include "runtime/tensor/cuda/cuda_check.h"
#include "runtime/tensor/cuda/cuda_ops.h"

namespace ds::runtime::cuda {
namespace {

class CudaEvent final : public OpsEvent {
 public:
  CudaEvent() { DS_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming)); }
  ~CudaEvent() override {
    if (event_ != nullptr) (void)cudaEventDestroy(event_);  // pending work releases it later
  }
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

cudaEvent_t eventOf(const OpsEvent& event) {
  const auto* e = dynamic_cast<const CudaEvent*>(&event);
  if (e == nullptr) throw InternalError("CudaOps: an event that CudaOps::newEvent did not make");
  return e->get();
}

}  // namespace

void* CudaOps::allocPinned(size_t bytes, const std::string& what) {
  if (bytes == 0) return nullptr;
  void* p = nullptr;
  const cudaError_t rc = cudaHostAlloc(&p, bytes, cudaHostAllocDefault);
  if (rc == cudaSuccess) return p;
  (void)cudaGetLastError();
  throw OutOfMemoryError(
      fmt::format("cudaHostAlloc of {} bytes ({:.1f} MiB) of page-locked host memory for {} on "
                  "{} failed: {} (ulimit -l, or the host's free memory)",
                  bytes, double(bytes) / 1048576.0, what, name_, cudaGetErrorString(rc)));
}

void CudaOps::releasePinned(void* ptr) noexcept {
  if (ptr != nullptr) (void)cudaFreeHost(ptr);
}

void CudaOps::uploadAsync(void* dst, const void* pinnedSrc, size_t bytes) {
  if (bytes == 0) return;
  DS_CUDA_CHECK(cudaMemcpyAsync(dst, pinnedSrc, bytes, cudaMemcpyHostToDevice, copyStream_));
}

void CudaOps::downloadAsync(void* pinnedDst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  DS_CUDA_CHECK(cudaMemcpyAsync(pinnedDst, src, bytes, cudaMemcpyDeviceToHost, copyStream_));
}

std::unique_ptr<OpsEvent> CudaOps::newEvent() { return std::make_unique<CudaEvent>(); }

void CudaOps::record(OpsEvent& event, OpsStream stream) {
  DS_CUDA_CHECK(
      cudaEventRecord(eventOf(event), stream == OpsStream::kCopy ? copyStream_ : stream_));
}

void CudaOps::streamWait(OpsStream stream, const OpsEvent& event) {
  DS_CUDA_CHECK(
      cudaStreamWaitEvent(stream == OpsStream::kCopy ? copyStream_ : stream_, eventOf(event), 0));
}

bool CudaOps::registerHost(void* ptr, size_t bytes) {
  if (ptr == nullptr || bytes == 0) return false;
  if (cudaHostRegister(ptr, bytes, cudaHostRegisterDefault) == cudaSuccess) return true;
  (void)cudaGetLastError();  // refused (e.g. RLIMIT_MEMLOCK): the caller stages instead
  return false;
}

void CudaOps::unregisterHost(void* ptr) noexcept {
  if (ptr != nullptr && cudaHostUnregister(ptr) != cudaSuccess) (void)cudaGetLastError();
}

bool CudaOps::streamWaitForeign(OpsStream stream, const void* cudaEvent) {
  // cudaEvent_t is a pointer to an opaque struct: the const is the caller's promise, not CUDA's.
  DS_CUDA_CHECK(cudaStreamWaitEvent(stream == OpsStream::kCopy ? copyStream_ : stream_,
                                    static_cast<cudaEvent_t>(const_cast<void*>(cudaEvent)), 0));
  return true;
}

bool CudaOps::done(const OpsEvent& event) {
  const cudaError_t rc = cudaEventQuery(eventOf(event));
  if (rc == cudaSuccess) return true;
  if (rc == cudaErrorNotReady) return false;
  DS_CUDA_CHECK(rc);
  return false;
}

void CudaOps::hostWait(const OpsEvent& event, std::chrono::milliseconds timeout,
                       const std::string& what) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  for (int polls = 0; !done(event); ++polls) {
    if (Clock::now() - start > timeout)
      throw TimeoutError(fmt::format(
          "{}: waited {} ms for {} (the copy stream's or compute stream's event never completed: "
          "a hung kernel or copy, or a device that stopped responding)",
          name_, timeout.count(), what));
    // Spin briefly (a block's copy is usually microseconds away), then sleep.
    if (polls < 200) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

}  // namespace ds::runtime::cuda
