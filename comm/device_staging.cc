// DeviceStaging (see device_staging.h): pinned host copies around a host-only collective.
#include "comm/device_staging.h"

#include <fmt/format.h>

#include "core/error.h"
#include "ds/config.h"

#if DS_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace ds::comm {

struct DeviceStaging::Pinned {
  void* data = nullptr;
  size_t bytes = 0;
  ~Pinned() {
#if DS_HAVE_CUDA
    if (data != nullptr) cudaFreeHost(data);
#endif
  }
};

namespace {

#if DS_HAVE_CUDA
void check(cudaError_t rc, const char* what, const char* step) {
  if (rc != cudaSuccess)
    throw CommError(
        fmt::format("{} on device buffers: {} failed: {}", what, step, cudaGetErrorString(rc)));
}
#endif

}  // namespace

DeviceStaging::DeviceStaging() = default;
DeviceStaging::~DeviceStaging() = default;

size_t DeviceStaging::hostBytes() const {
  size_t n = 0;
  for (const auto& b : buffers_) n += b->bytes;
  return n;
}

bool anyOnDevice(const std::vector<BufferView>& views) {
  for (const auto& v : views)
    if (v.device == Device::kCuda) return true;
  return false;
}

WorkPtr DeviceStaging::run(
    const char* what, std::vector<BufferView> views, const std::vector<bool>& inputs,
    const std::vector<bool>& outputs,
    const std::function<WorkPtr(const std::vector<BufferView>&)>& collective) {
#if DS_HAVE_CUDA
  while (buffers_.size() < views.size()) buffers_.push_back(std::make_unique<Pinned>());
  std::vector<BufferView> host = views;
  for (size_t i = 0; i < views.size(); ++i) {
    if (views[i].device != Device::kCuda) continue;
    Pinned& p = *buffers_[i];
    const size_t bytes = views[i].bytes();
    if (p.bytes < bytes) {
      if (p.data != nullptr) check(cudaFreeHost(p.data), what, "cudaFreeHost");
      p.data = nullptr;
      p.bytes = 0;
      check(cudaMallocHost(&p.data, bytes), what,
            fmt::format("cudaMallocHost of {} staging bytes", bytes).c_str());
      p.bytes = bytes;
    }
    host[i].data = p.data;
    host[i].device = Device::kCpu;
    // cudaMemcpy orders after the legacy default stream's work that produced the input.
    if (inputs[i] && bytes > 0)
      check(cudaMemcpy(p.data, views[i].data, bytes, cudaMemcpyDeviceToHost), what,
            "device-to-host copy");
  }
  collective(host)->wait();
  for (size_t i = 0; i < views.size(); ++i)
    if (views[i].device == Device::kCuda && outputs[i] && views[i].bytes() > 0)
      check(cudaMemcpy(views[i].data, host[i].data, views[i].bytes(), cudaMemcpyHostToDevice), what,
            "host-to-device copy");
  return completedWork(what);
#else
  (void)views;
  (void)inputs;
  (void)outputs;
  (void)collective;
  throw NotSupported(fmt::format(
      "{}: a buffer is on a CUDA device, but this build has no CUDA to stage it through host "
      "memory",
      what));
#endif
}

}  // namespace ds::comm
