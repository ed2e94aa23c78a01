// The nccl backend's factory (CUDA builds only): the unique id travels through the store
// ("nccl/uid", set by rank 0), each group has one CUDA stream, and every Work completes when the
// CUDA event recorded after its kernel fires. Collectives take device buffers as they are and
// host buffers through device copies (host_staging.h); send/recv take device buffers only. The
// device is LOCAL_RANK % device count; more local ranks (LOCAL_SIZE) than devices is refused
// before NCCL is asked (NCCL allows one rank per GPU on a host).
// fp16/bf16 sum/avg are accumulated in fp32; send/recv are enqueued as one NCCL group at the
// first wait or the next collective; a liveness watchdog names a dead peer (docs/comm.md).
#pragma once

#include <memory>
#include <string>

#include "comm/backend.h"
#include "comm/process_group.h"
#include "comm/store/store.h"

namespace ds::comm {

std::unique_ptr<Backend> createNcclBackend(std::shared_ptr<Store> store, int rank, int size,
                                           const GroupOptions& opts);

// Number of CUDA devices visible to this process (0 when the driver or devices are absent).
int cudaDeviceCount();

// ConfigError unless localSize ranks of one host fit on `devices` GPUs one each: names `who`
// (rank, host, LOCAL_RANK), both counts, CUDA_VISIBLE_DEVICES (`visible`, "" when unset) and
// the ways out (fewer ranks per node; gloo with train.device_sharing).
void checkOneRankPerDevice(int localSize, int devices, const std::string& who,
                           const std::string& visible);

}  // namespace ds::comm
