// openRankDevice: the one call a trainer makes at startup to get its device. Counts the visible
// CUDA devices, applies train.device (selectDevice), makes the chosen GPU current and creates
// its context (so a busy or full device fails here), and describes what it got. Not thread-safe
// with other CUDA setup on the calling thread: it sets the thread's current device.
#pragma once

#include "runtime/device/cuda_device.h"
#include "runtime/device/device_select.h"

namespace ds::runtime {

struct RankDevice {
  DeviceChoice choice;  // cpu or cuda:<index>, and why (a startup-log line)
  DeviceInfo info;      // what it is: info.summary() for the startup log and the run summary
};

// site.visibleDevices and site.whyNone are filled here (visibleCudaDevices()); the caller gives
// rank, localRank, localSize, host and, when it knows it, cudaVisibleDevices. Errors:
// ConfigError (train.device cuda with no device, too few devices without sharing), ds::Error
// (the device is busy, lost or out of memory), each naming the rank, the host and the device.
RankDevice openRankDevice(const DeviceRequest& req, DeviceSite site);

}  // namespace ds::runtime
