// cuda_device without (and, on a GPU machine, with) a device: visibleCudaDevices never throws and
// says why it sees none, describeCpu reports host memory (a limiting memory cgroup included), the
// version texts, and [gpu]: describeCudaDevice/activateCudaDevice/openRankDevice on cuda:0
// (skipped where none is visible).
#include <catch2/catch.hpp>

#include "core/error.h"
#include "ds/config.h"
#include "runtime/device/cuda_device.h"
#include "runtime/device/host_memory.h"
#include "runtime/device/rank_device.h"
#include "tests/support/skip.h"

using namespace ds::runtime;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

TEST_CASE("cuda device: visibleCudaDevices never throws and explains zero", "[unit]") {
  std::string why = "stale";
  int n = -1;
  CHECK_NOTHROW(n = visibleCudaDevices(&why));
  CHECK(n >= 0);
  if (n == 0) {
    CHECK_FALSE(why.empty());
    if (!DS_HAVE_CUDA) CHECK(why == "this build has no CUDA (DS_HAVE_CUDA=0)");
  } else {
    CHECK(why.empty());
  }
  CHECK(visibleCudaDevices() == n);  // whyNone is optional
}

TEST_CASE("cuda device: describeCpu reports host memory", "[unit]") {
  DeviceInfo d = describeCpu();
  CHECK(d.device == "cpu");
  CHECK(d.totalBytes > 0);
  CHECK(d.freeBytes <= d.totalBytes);
  CHECK_THAT(d.summary(), StartsWith("cpu, "));
  CHECK_THAT(d.summary(), Contains(" GiB host memory ("));
  const HostMemory free = hostMemory();  // the memory-fit check's figure, cgroup included
  CHECK(d.freeBytes <= free.availableBytes + (size_t(64) << 20));  // read moments apart
  CHECK(d.freeLimitedBy.empty() == (free.source == "MemAvailable"));
  if (DS_HAVE_CUDA) CHECK(d.cudaRuntimeVersion > 0);  // the runtime needs no driver to say it
  if (DS_HAVE_NCCL) CHECK(d.ncclVersion > 0);
}

TEST_CASE("cuda device: the CPU's summary names the memory cgroup that limits it", "[unit]") {
  DeviceInfo d;
  d.totalBytes = size_t(24) << 30;
  d.freeBytes = size_t(1) << 30;
  CHECK(d.summary() == "cpu, 24.0 GiB host memory (1.0 free)");
  d.freeLimitedBy =
      "the memory cgroup /job (limit 1024 MiB, 0 MiB in use less 0 MiB of inactive "
      "page cache)";
  CHECK(d.summary() ==
        "cpu, 24.0 GiB host memory (1.0 free under the memory cgroup /job (limit 1024 MiB, 0 MiB "
        "in use less 0 MiB of inactive page cache))");
}

TEST_CASE("cuda device: version texts and the summary line", "[unit]") {
  CHECK(cudaVersionText(13000) == "13.0");
  CHECK(cudaVersionText(12040) == "12.4");
  CHECK(cudaVersionText(0) == "");
  CHECK(ncclVersionText(22703) == "2.27.3");
  CHECK(ncclVersionText(2804) == "2.8.4");
  CHECK(ncclVersionText(0) == "");
  DeviceInfo d;
  d.device = "cuda:0";
  d.name = "NVIDIA H200";
  d.totalBytes = size_t(1398) * (size_t(1) << 30) / 10;
  d.freeBytes = size_t(1389) * (size_t(1) << 30) / 10;
  d.ccMajor = 9;
  d.cudaRuntimeVersion = 13000;
  d.cudaDriverVersion = 13000;
  d.ncclVersion = 22703;
  CHECK(d.summary() ==
        "cuda:0 NVIDIA H200, 139.8 GiB (138.9 free), sm_90, CUDA 13.0 (driver 13.0), NCCL 2.27.3");
  d.ncclVersion = 0;
  d.cudaDriverVersion = 0;
  CHECK(d.summary() ==
        "cuda:0 NVIDIA H200, 139.8 GiB (138.9 free), sm_90, CUDA 13.0 (driver none)");
}

TEST_CASE("cuda device: train.device cpu opens the CPU without asking CUDA", "[unit]") {
  DeviceRequest r;
  r.mode = "cpu";
  DeviceSite s;
  s.host = "here";
  RankDevice d = openRankDevice(r, s);
  CHECK_FALSE(d.choice.cuda);
  CHECK(d.info.device == "cpu");
}

TEST_CASE("cuda device: without a device, auto is the CPU and cuda an error", "[unit]") {
  if (visibleCudaDevices() > 0) DS_SKIP("a CUDA device is visible");
  DeviceSite s;
  s.rank = 1;
  s.host = "here";
  RankDevice d = openRankDevice(DeviceRequest{}, s);
  CHECK_FALSE(d.choice.cuda);
  CHECK_THAT(d.choice.why, StartsWith("cpu (train.device auto: "));
  DeviceRequest cuda;
  cuda.mode = "cuda";
  CHECK_THROWS_WITH(openRankDevice(cuda, s),
                    StartsWith("train.device is 'cuda' but rank 1 (LOCAL_RANK 0) on here sees no "
                               "CUDA device: "));
  if (!DS_HAVE_CUDA) {
    CHECK_THROWS_AS(describeCudaDevice(0), ds::NotSupported);
    CHECK_THROWS_AS(activateCudaDevice(0, "rank 0"), ds::NotSupported);
  }
}

TEST_CASE("cuda device: cuda:0 has a name, memory and versions", "[gpu]") {
  std::string why;
  if (visibleCudaDevices(&why) == 0) DS_SKIP("no CUDA device: " << why);
  CHECK_NOTHROW(activateCudaDevice(0, "rank 0 (LOCAL_RANK 0) on here"));
  DeviceInfo d = describeCudaDevice(0);
  CHECK(d.device == "cuda:0");
  CHECK_FALSE(d.name.empty());
  CHECK(d.totalBytes > 0);
  CHECK(d.freeBytes > 0);
  CHECK(d.freeBytes <= d.totalBytes);
  CHECK(d.ccMajor >= 3);
  CHECK(d.cudaRuntimeVersion > 0);
  CHECK(d.cudaDriverVersion > 0);
  if (DS_HAVE_NCCL) CHECK(d.ncclVersion > 0);
  CHECK_THAT(d.summary(), StartsWith("cuda:0 " + d.name + ", "));
  INFO(d.summary());
  DeviceSite s;
  s.host = "here";
  RankDevice r = openRankDevice(DeviceRequest{}, s);
  CHECK(r.choice.cuda);
  CHECK(r.choice.index == 0);
  CHECK(r.info.name == d.name);
  // An ordinal past the visible ones fails with the rank and the device named.
  int n = visibleCudaDevices();
  CHECK_THROWS_WITH(
      activateCudaDevice(n, "rank 9 (LOCAL_RANK 9) on here"),
      StartsWith("rank 9 (LOCAL_RANK 9) on here: cannot use cuda:" + std::to_string(n) + ": "));
}
