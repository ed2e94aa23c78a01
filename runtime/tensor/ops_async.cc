// The synchronous defaults of Ops' asynchronous copies (see ops.h): plain host memory for
// "pinned", the ordinary upload/download for the copies, events that are always complete. Right
// for every Ops whose copies are synchronous (CpuOps); CudaOps overrides all of them.
#include <fmt/format.h>

#include <new>

#include "runtime/tensor/ops.h"

namespace ds::runtime {

void* Ops::allocPinned(size_t bytes, const std::string& what) {
  if (bytes == 0) return nullptr;
  void* p = ::operator new(bytes, std::align_val_t(64), std::nothrow);
  if (p == nullptr)
    throw OutOfMemoryError(
        fmt::format("{}: host allocation of {} bytes for {} failed", name(), bytes, what));
  return p;
}

bool Ops::registerHost(void* /*ptr*/, size_t /*bytes*/) { return false; }

void Ops::unregisterHost(void* /*ptr*/) noexcept {}

void Ops::releasePinned(void* ptr) noexcept {
  if (ptr != nullptr) ::operator delete(ptr, std::align_val_t(64));
}

void Ops::uploadAsync(void* dst, const void* pinnedSrc, size_t bytes) {
  upload(dst, pinnedSrc, bytes);
}

void Ops::downloadAsync(void* pinnedDst, const void* src, size_t bytes) {
  download(pinnedDst, src, bytes);
}

std::unique_ptr<OpsEvent> Ops::newEvent() { return std::make_unique<OpsEvent>(); }
void Ops::record(OpsEvent& /*event*/, OpsStream /*stream*/) {}
void Ops::streamWait(OpsStream /*stream*/, const OpsEvent& /*event*/) {}

bool Ops::streamWaitForeign(OpsStream /*stream*/, const void* /*cudaEvent*/) { return false; }
bool Ops::done(const OpsEvent& /*event*/) { return true; }
void Ops::hostWait(const OpsEvent& /*event*/, std::chrono::milliseconds /*timeout*/,
                   const std::string& /*what*/) {}

}  // namespace ds::runtime
