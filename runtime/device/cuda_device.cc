// The CUDA (and NCCL version) boundary of runtime/device: device count, properties, free memory,
// context creation. Each CUDA error becomes one message with cudaGetErrorString's text; a CPU
// build compiles none of it and reports no devices.
#include "runtime/device/cuda_device.h"

#include <fmt/format.h>
#include <unistd.h>

#include "core/error.h"
#include "ds/config.h"
#include "runtime/device/host_memory.h"

#if DS_HAVE_CUDA
#include <cuda_runtime.h>
#endif
#if DS_HAVE_NCCL
#include <nccl.h>
#endif

namespace ds::runtime {
namespace {

double gib(size_t bytes) { return double(bytes) / double(size_t(1) << 30); }

// The versions every DeviceInfo carries: what the build links and the driver it found.
void fillVersions(DeviceInfo& d) {
#if DS_HAVE_CUDA
  if (cudaRuntimeGetVersion(&d.cudaRuntimeVersion) != cudaSuccess) d.cudaRuntimeVersion = 0;
  if (cudaDriverGetVersion(&d.cudaDriverVersion) != cudaSuccess) d.cudaDriverVersion = 0;
  cudaGetLastError();  // neither leaves a sticky error, but clear what they set
#endif
#if DS_HAVE_NCCL
  if (ncclGetVersion(&d.ncclVersion) != ncclSuccess) d.ncclVersion = 0;
#endif
  (void)d;
}

#if DS_HAVE_CUDA
[[noreturn]] void fail(const std::string& what, int index, cudaError_t rc) {
  cudaGetLastError();
  throw Error(fmt::format("cuda:{}: {} failed: {} ({})", index, what, cudaGetErrorString(rc),
                          cudaGetErrorName(rc)));
}
#endif

}  // namespace

std::string cudaVersionText(int v) {
  if (v <= 0) return "";
  return fmt::format("{}.{}", v / 1000, (v % 1000) / 10);
}

std::string ncclVersionText(int v) {
  if (v <= 0) return "";
  if (v >= 10000) return fmt::format("{}.{}.{}", v / 10000, (v / 100) % 100, v % 100);
  return fmt::format("{}.{}.{}", v / 1000, (v / 100) % 10, v % 100);
}

std::string DeviceInfo::summary() const {
  if (device == "cpu")
    return fmt::format("cpu, {:.1f} GiB host memory ({:.1f} free{})", gib(totalBytes),
                       gib(freeBytes), freeLimitedBy.empty() ? "" : " under " + freeLimitedBy);
  std::string s = fmt::format("{} {}, {:.1f} GiB ({:.1f} free), sm_{}{}", device, name,
                              gib(totalBytes), gib(freeBytes), ccMajor, ccMinor);
  if (cudaRuntimeVersion > 0)
    s += fmt::format(", CUDA {} (driver {})", cudaVersionText(cudaRuntimeVersion),
                     cudaDriverVersion > 0 ? cudaVersionText(cudaDriverVersion) : "none");
  if (ncclVersion > 0) s += ", NCCL " + ncclVersionText(ncclVersion);
  return s;
}

int visibleCudaDevices(std::string* whyNone) {
  std::string why;
  int n = 0;
#if DS_HAVE_CUDA
  cudaError_t rc = cudaGetDeviceCount(&n);
  if (rc != cudaSuccess) {
    cudaGetLastError();
    n = 0;
    why = fmt::format("cudaGetDeviceCount: {} ({})", cudaGetErrorString(rc), cudaGetErrorName(rc));
    if (rc == cudaErrorNoDevice) why += "; none installed, or CUDA_VISIBLE_DEVICES hides them all";
    if (rc == cudaErrorInsufficientDriver) why += "; no NVIDIA driver, or one older than the build";
  } else if (n <= 0) {
    n = 0;
    why = "no CUDA device is visible";
  }
#else
  why = "this build has no CUDA (DS_HAVE_CUDA=0)";
#endif
  if (whyNone) *whyNone = n > 0 ? "" : why;
  return n;
}

void activateCudaDevice(int index, const std::string& who) {
#if DS_HAVE_CUDA
  cudaError_t rc = cudaSetDevice(index);
  if (rc == cudaSuccess) rc = cudaFree(nullptr);  // creates the context now, not at first use
  if (rc == cudaSuccess) return;
  cudaGetLastError();
  std::string hint;
  if (rc == cudaErrorDevicesUnavailable)
    hint = "; another process holds it (exclusive compute mode: nvidia-smi shows which)";
  if (rc == cudaErrorMemoryAllocation) hint = "; its memory is taken (nvidia-smi shows by whom)";
  throw Error(fmt::format("{}: cannot use cuda:{}: {} ({}){}", who, index, cudaGetErrorString(rc),
                          cudaGetErrorName(rc), hint));
#else
  throw NotSupported(
      fmt::format("{}: cannot use cuda:{}: this build has no CUDA (DS_HAVE_CUDA=0)", who, index));
#endif
}

DeviceInfo describeCudaDevice(int index) {
  DeviceInfo d;
#if DS_HAVE_CUDA
  cudaDeviceProp p{};
  if (cudaError_t rc = cudaGetDeviceProperties(&p, index); rc != cudaSuccess)
    fail("cudaGetDeviceProperties", index, rc);
  d.device = fmt::format("cuda:{}", index);
  d.name = p.name;
  d.ccMajor = p.major;
  d.ccMinor = p.minor;
  if (cudaError_t rc = cudaSetDevice(index); rc != cudaSuccess) fail("cudaSetDevice", index, rc);
  if (cudaError_t rc = cudaMemGetInfo(&d.freeBytes, &d.totalBytes); rc != cudaSuccess)
    fail("cudaMemGetInfo", index, rc);
  fillVersions(d);
#else
  throw NotSupported(fmt::format("cuda:{}: this build has no CUDA (DS_HAVE_CUDA=0)", index));
#endif
  return d;
}

DeviceInfo describeCpu() {
  DeviceInfo d;
  d.device = "cpu";
  d.name = "cpu";
  long page = sysconf(_SC_PAGESIZE), pages = sysconf(_SC_PHYS_PAGES);
  if (page > 0 && pages > 0) d.totalBytes = size_t(page) * size_t(pages);
  const HostMemory free = hostMemory();
  d.freeBytes = free.availableBytes;
  if (free.source != "MemAvailable") d.freeLimitedBy = free.source;
  fillVersions(d);
  return d;
}

}  // namespace ds::runtime
