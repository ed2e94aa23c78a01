// Which device a rank trains on (issue "GPU training", docs/gpu.md): train.device (auto|cpu|cuda),
// the rank's place on its node and the CUDA devices it sees. Pure logic: no CUDA call, no
// environment read but parseLocalRank's (through the knob registry), so every branch is testable
// without a GPU. Errors are ConfigErrors naming the key, the rank, the host and the counts.
#pragma once

#include <optional>
#include <string>

#include "core/knobs.h"

namespace ds::runtime {

// The plan's request: train.device, train.device_sharing, train.tf32 (TrainPlan::device,
// deviceSharing, tf32). allowTf32 is carried for the ops; selectDevice does not look at it.
struct DeviceRequest {
  std::string mode = "auto";  // "auto" | "cpu" | "cuda"
  bool allowSharing = false;
  bool allowTf32 = false;
};

// Where the rank runs and what it sees. visibleDevices and whyNone come from
// visibleCudaDevices() (cuda_device.h); cudaVisibleDevices is CUDA_VISIBLE_DEVICES' text when the
// caller knows it (errors then quote it), nullopt when unknown.
struct DeviceSite {
  int rank = 0;
  int localRank = 0;  // RankEnv::localRank (checked when derived), or parseLocalRank()
  int localSize = 1;  // ranks on this node
  std::string host;
  int visibleDevices = 0;
  std::string whyNone;  // why visibleDevices is 0 ("" when unknown)
  std::optional<std::string> cudaVisibleDevices;
};

struct DeviceChoice {
  bool cuda = false;
  int index = -1;   // CUDA device ordinal (among the visible ones) when cuda, else -1
  std::string why;  // one line for the startup log: "cuda:1 (train.device auto, LOCAL_RANK 1)"
  std::string name() const;  // "cuda:1" or "cpu"
};

// auto: cuda:<localRank> when devices are visible, else cpu; cpu: cpu; cuda: a device or an
// error. With devices in use, localSize > visibleDevices is an error naming both counts and
// train.device_sharing, unless allowSharing (then index = localRank % visibleDevices). A mode
// other than the three is an InternalError (the plan schema has refused it already).
DeviceChoice selectDevice(const DeviceRequest& req, const DeviceSite& site);

// "rank 3 (LOCAL_RANK 1) on node-a": how every device error names the rank.
std::string siteText(const DeviceSite& site);

// LOCAL_RANK, checked by the knob registry (digits only, in [0, localSize - 1]); 0 when unset.
// ConfigError "LOCAL_RANK='x': expected an integer in [0, N]". Prefer RankEnv::localRank
// (core/rank_env.h), which also covers mpirun's and srun's variables; this is for code that has
// no RankEnv.
int parseLocalRank(const EnvSource& env, int localSize);

}  // namespace ds::runtime
