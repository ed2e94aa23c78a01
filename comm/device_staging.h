// DeviceStaging: collectives on CUDA device buffers for a backend that only takes host memory
// (gloo, mpi): the inputs are copied to pinned host buffers, the host collective runs and is
// waited for, and the outputs are copied back, so the Work returned is already complete. Used by
// ProcessGroup whenever a view is on the device and its backend does not support the device;
// NCCL takes device buffers directly. Not asynchronous (the copies and the collective run on the
// caller's thread) and not a device allocator. Without CUDA in the build a device view is an
// error naming the collective. One issuing thread per group, as ProcessGroup.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "comm/types.h"
#include "comm/work.h"

namespace ds::comm {

class DeviceStaging {
 public:
  DeviceStaging();
  ~DeviceStaging();
  DeviceStaging(const DeviceStaging&) = delete;
  DeviceStaging& operator=(const DeviceStaging&) = delete;

  // views: every buffer of the call; inputs / outputs: which of them are read / written. run()
  // gets the same views pointing at host copies and returns the host collective's Work.
  WorkPtr run(const char* what, std::vector<BufferView> views, const std::vector<bool>& inputs,
              const std::vector<bool>& outputs,
              const std::function<WorkPtr(const std::vector<BufferView>&)>& collective);

  // Pinned host bytes held now (grown on demand, kept for the next call).
  size_t hostBytes() const;

 private:
  struct Pinned;
  std::vector<std::unique_ptr<Pinned>> buffers_;
};

// Whether any of these views is on a CUDA device.
bool anyOnDevice(const std::vector<BufferView>& views);

}  // namespace ds::comm
