// The nccl backend's factory (CUDA builds only): the unique id travels through the store
// ("nccl/uid", set by rank 0), each group has one CUDA stream, and every Work completes when the
// CUDA event recorded after its kernel fires. Device buffers only (BufferView::device == kCuda);
// host buffers are refused with a hint to use gloo. The device is LOCAL_RANK % device count.
// fp16/bf16 sum/avg are accumulated in fp32; send/recv are enqueued as one NCCL group at the
// first wait or the next collective; a liveness watchdog names a dead peer (docs/comm.md).
#pragma once

#include <memory>

#include "comm/backend.h"
#include "comm/process_group.h"
#include "comm/store/store.h"

namespace ds::comm {

std::unique_ptr<Backend> createNcclBackend(std::shared_ptr<Store> store, int rank, int size,
                                           const GroupOptions& opts);

// Number of CUDA devices visible to this process (0 when the driver or devices are absent).
int cudaDeviceCount();

}  // namespace ds::comm
