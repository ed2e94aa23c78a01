// BenchBuffer: comm-bench's fp32 buffer where the backend wants it. Host backends (gloo, mpi)
// use the host array directly (shared host memory, as ZeRO stage 0's gradients, unless asked for
// private memory: comm/shared_host_buffer.h); nccl gets device memory (CUDA builds with nccl only)
// and the host array is a mirror that upload()/download() copy across, so inputs are filled and
// results checked on the host either way. Not a tensor type: nothing but comm-bench uses it.
#pragma once

#include <cstddef>

#include "comm/shared_host_buffer.h"
#include "comm/types.h"

namespace ds::runtime {

class BenchBuffer {
 public:
  BenchBuffer(size_t count, comm::Device device, bool sharedHost = true);
  ~BenchBuffer();
  BenchBuffer(const BenchBuffer&) = delete;
  BenchBuffer& operator=(const BenchBuffer&) = delete;

  comm::SharedArray<float>& host() { return host_; }
  const comm::SharedArray<float>& host() const { return host_; }
  size_t size() const { return host_.size(); }
  // Host -> device and device -> host (no-ops for host buffers). Synchronous: upload() returns
  // once the device copy is complete; download() after the collective's Work was waited on.
  void upload();
  void download();
  // The buffer the collective reads and writes.
  comm::BufferView view();

 private:
  comm::SharedArray<float> host_;
  comm::Device device_;
  void* dev_ = nullptr;
};

}  // namespace ds::runtime
