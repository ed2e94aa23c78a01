// HostStaging (see host_staging.h): device copies around a device-only nccl collective.
#include "comm/nccl/host_staging.h"

#include <cuda_runtime.h>
#include <fmt/format.h>

#include "core/error.h"

namespace ds::comm::nccl_impl {

struct HostStaging::DeviceBuffer {
  void* data = nullptr;
  size_t bytes = 0;
  ~DeviceBuffer() {
    if (data != nullptr) cudaFree(data);
  }
};

namespace {

void check(cudaError_t rc, const char* what, const std::string& step) {
  if (rc != cudaSuccess) {
    cudaGetLastError();
    throw CommError(
        fmt::format("nccl {} on host buffers: {} failed: {}", what, step, cudaGetErrorString(rc)));
  }
}

}  // namespace

HostStaging::HostStaging(int device) : device_(device) {}

HostStaging::~HostStaging() {
  cudaSetDevice(device_);
  buffers_.clear();
}

size_t HostStaging::deviceBytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& b : buffers_) n += b->bytes;
  return n;
}

bool anyOnHost(const std::vector<BufferView>& views) {
  for (const auto& v : views)
    if (v.device != Device::kCuda) return true;
  return false;
}

WorkPtr HostStaging::run(const char* what, std::vector<BufferView> views,
                         const std::vector<bool>& inputs, const std::vector<bool>& outputs,
                         const std::function<WorkPtr(const std::vector<BufferView>&)>& collective) {
  std::lock_guard<std::mutex> lock(mu_);
  check(cudaSetDevice(device_), what, fmt::format("cudaSetDevice({})", device_));
  while (buffers_.size() < views.size()) buffers_.push_back(std::make_unique<DeviceBuffer>());
  std::vector<BufferView> staged = views;
  for (size_t i = 0; i < views.size(); ++i) {
    if (views[i].device == Device::kCuda) continue;
    DeviceBuffer& d = *buffers_[i];
    const size_t bytes = views[i].bytes();
    if (d.bytes < bytes) {
      if (d.data != nullptr) check(cudaFree(d.data), what, "cudaFree");
      d.data = nullptr;
      d.bytes = 0;
      check(cudaMalloc(&d.data, bytes), what,
            fmt::format("cudaMalloc of {} staging bytes on cuda:{}", bytes, device_));
      d.bytes = bytes;
    }
    staged[i].data = d.data;
    staged[i].device = Device::kCuda;
    // A synchronous copy on the legacy default stream: the backend orders its stream after it.
    if (inputs[i] && bytes > 0)
      check(cudaMemcpy(d.data, views[i].data, bytes, cudaMemcpyHostToDevice), what,
            "host-to-device copy");
  }
  collective(staged)->wait();
  for (size_t i = 0; i < views.size(); ++i)
    if (views[i].device != Device::kCuda && outputs[i] && views[i].bytes() > 0)
      check(cudaMemcpy(views[i].data, staged[i].data, views[i].bytes(), cudaMemcpyDeviceToHost),
            what, "device-to-host copy");
  return completedWork(fmt::format("nccl {} (host buffers staged on cuda:{})", what, device_));
}

}  // namespace ds::comm::nccl_impl
