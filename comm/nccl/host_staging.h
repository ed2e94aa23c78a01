// HostStaging: collectives on host buffers for the nccl backend, which moves device memory only.
// The host inputs are copied to device buffers of the group's GPU, the device collective runs and
// is waited for (outside the communicator's lock, so the peer watchdog can still abort it), and
// the outputs are copied back, so the Work returned is already complete. The mirror image of
// comm/device_staging.h (device tensors through pinned host memory for gloo and mpi). It serves
// the trainer's small host-side collectives (loss and norm scalars, the memory-fit check, the
// data-order check) and the host engine of the offload paths; those pay two copies per call.
// Not asynchronous. Calls from several threads are serialised (the buffers are shared), but the
// group's collectives must still be issued in the same order on every rank, as ProcessGroup's.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "comm/types.h"
#include "comm/work.h"

namespace ds::comm::nccl_impl {

class HostStaging {
 public:
  explicit HostStaging(int device);
  ~HostStaging();
  HostStaging(const HostStaging&) = delete;
  HostStaging& operator=(const HostStaging&) = delete;

  // views: every buffer of the call; inputs / outputs: which of them are read / written. The
  // collective gets the same views with the host ones replaced by device copies, and returns
  // the device collective's Work.
  WorkPtr run(const char* what, std::vector<BufferView> views, const std::vector<bool>& inputs,
              const std::vector<bool>& outputs,
              const std::function<WorkPtr(const std::vector<BufferView>&)>& collective);

  // Device bytes held now (grown on demand, kept for the next call).
  size_t deviceBytes() const;

 private:
  struct DeviceBuffer;
  int device_;
  mutable std::mutex mu_;  // one staged call at a time: buffers_ is shared
  std::vector<std::unique_ptr<DeviceBuffer>> buffers_;
};

// Whether any of these views is in host memory.
bool anyOnHost(const std::vector<BufferView>& views);

}  // namespace ds::comm::nccl_impl
