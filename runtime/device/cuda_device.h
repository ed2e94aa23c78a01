// What the rank's device is: how many CUDA devices this process sees, and a DeviceInfo (name,
// memory, compute capability, CUDA runtime/driver and NCCL versions) for a CUDA device or the
// CPU, with the one-line summary the startup log and the run summary show. The only file of
// runtime/device that calls CUDA; every call is under DS_HAVE_CUDA (a CPU build sees 0 devices).
#pragma once

#include <cstddef>
#include <string>

namespace ds::runtime {

struct DeviceInfo {
  std::string device = "cpu";            // "cuda:0" | "cpu"
  std::string name;                      // "NVIDIA H200"; "cpu" for the CPU
  size_t totalBytes = 0, freeBytes = 0;  // device memory (host memory for the CPU)
  // The CPU's freeBytes when a memory cgroup leaves less than MemAvailable: that cgroup, its
  // limit and usage (host_memory.h); empty otherwise.
  std::string freeLimitedBy;
  int ccMajor = 0, ccMinor = 0;  // compute capability (0 for the CPU)
  int cudaRuntimeVersion = 0;    // cudaRuntimeGetVersion (13000 = 13.0); 0 without CUDA
  int cudaDriverVersion = 0;     // cudaDriverGetVersion; 0 without a driver
  int ncclVersion = 0;           // ncclGetVersion (22703 = 2.27.3); 0 without NCCL

  // "cuda:0 NVIDIA H200, 139.8 GiB (138.9 free), sm_90, CUDA 13.0 (driver 13.0), NCCL 2.27.3"
  // or "cpu, 125.7 GiB host memory (98.2 free)" ("(0.9 free under the memory cgroup /job (limit
  // 1024 MiB, ...))" where a cgroup leaves less).
  std::string summary() const;
};

// CUDA devices this process may use (after CUDA_VISIBLE_DEVICES). 0 in a build without CUDA,
// without a driver, or with none visible; then *whyNone (when given) says which, with CUDA's own
// text (cudaGetErrorString). Never throws a CUDA error.
int visibleCudaDevices(std::string* whyNone = nullptr);

// cuda:<index>'s properties and free memory, plus the versions. Makes cuda:<index> the calling
// thread's current device (creating its context: call it for the rank's own device only).
// Throws ds::Error naming the device and CUDA's text.
DeviceInfo describeCudaDevice(int index);

// The CPU: host memory (total; free as the memory-fit check counts it: MemAvailable, or what a
// memory cgroup above the process leaves, host_memory.h) and the CUDA/NCCL versions the build
// links, if any.
DeviceInfo describeCpu();

// Makes cuda:<index> current and creates its context now, so a device that is busy (another
// process holds it in exclusive mode), lost or out of memory fails at startup with one error
// naming `who` ("rank 1 (LOCAL_RANK 1) on node-a") and the device. NotSupported in a CPU build.
void activateCudaDevice(int index, const std::string& who);

// 13000 -> "13.0"; 12040 -> "12.4"; 0 -> "".
std::string cudaVersionText(int version);
// 22703 -> "2.27.3" (NCCL >= 2.9: major*10000 + minor*100 + patch; older: *1000); 0 -> "".
std::string ncclVersionText(int version);

}  // namespace ds::runtime
