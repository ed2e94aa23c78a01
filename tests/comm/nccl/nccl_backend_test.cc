// The nccl backend. [unit]: without a CUDA device it is refused with a hint to use gloo (checked
// in a child that sees no device where one is visible); more local ranks than GPUs is refused
// before NCCL is asked, naming both counts. [gpu], skipped without a device:
// on a device, every collective on device buffers (and, staged, on host buffers) at world size 1
// against host-computed references (a single-GPU machine cannot host two NCCL ranks: NCCL refuses
// duplicate GPUs), and that a collective is ordered after the caller's default-stream work that
// produced its input.
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "comm/nccl/nccl_backend.h"
#include "comm/process_group.h"
#include "comm/registry.h"
#include "comm/store/hash_store.h"
#include "core/error.h"
#include "tests/support/skip.h"
#include "tests/support/spawn_ranks.h"

using namespace ds;
using namespace ds::comm;

namespace {

const char* kNoDeviceChild = "nccl child: the backend is refused without a visible device";

void checkRefusedWithoutDevice() {
  REQUIRE(cudaDeviceCount() == 0);
  try {
    createBackend("nccl", std::make_shared<HashStore>(), 0, 1, {});
    FAIL("expected a ConfigError");
  } catch (const ConfigError& e) {
    CHECK_THAT(e.what(), Catch::Contains("--comm_backend gloo"));
  }
  CHECK(defaultBackendName() == "gloo");
}

}  // namespace

TEST_CASE("nccl child: the backend is refused without a visible device", "[.][nccl-child]") {
  checkRefusedWithoutDevice();
}

// Where a device is visible, the check runs in a fresh process that sees none
// (CUDA_VISIBLE_DEVICES=-1), so it holds on every machine.
TEST_CASE("nccl backend: without a CUDA device it is refused, naming gloo", "[unit]") {
  if (cudaDeviceCount() == 0) {
    checkRefusedWithoutDevice();
    return;
  }
  std::string exe = std::filesystem::read_symlink("/proc/self/exe").string();
  std::string out;
  int rc = ds::test::runCommand("CUDA_VISIBLE_DEVICES=-1 '" + exe + "' '" + kNoDeviceChild + "'",
                                &out, std::chrono::seconds(120));
  INFO(out);
  CHECK(rc == 0);
  CHECK(out.find("All tests passed") != std::string::npos);
}

TEST_CASE("nccl backend: collectives on device buffers, world size 1", "[gpu]") {
  if (cudaDeviceCount() == 0) DS_SKIP("no CUDA device");
  ProcessGroup pg(createBackend("nccl", std::make_shared<HashStore>(), 0, 1, {}));
  CHECK(pg.backendName() == "nccl");
  const size_t n = 1031;
  std::vector<float> host(n);
  for (size_t i = 0; i < n; ++i) host[i] = static_cast<float>(i % 17) - 8.f;
  float *d = nullptr, *d2 = nullptr;
  REQUIRE(cudaMalloc(&d, n * sizeof(float)) == cudaSuccess);
  REQUIRE(cudaMalloc(&d2, n * sizeof(float)) == cudaSuccess);
  REQUIRE(cudaMemcpy(d, host.data(), n * 4, cudaMemcpyHostToDevice) == cudaSuccess);
  BufferView v{d, n, DType::kF32, Device::kCuda}, v2{d2, n, DType::kF32, Device::kCuda};
  pg.allreduce(v, ReduceOp::kSum)->wait();
  pg.allreduce(v, ReduceOp::kAvg)->wait();
  pg.broadcast(v, 0)->wait();
  pg.reduceScatter(v, v2, {n})->wait();
  pg.allgather(v2, v, {n})->wait();
  pg.barrier()->wait();
  std::vector<float> back(n);
  REQUIRE(cudaMemcpy(back.data(), d, n * 4, cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(back == host);  // every op is the identity at world size 1
  // Host buffers are staged through device copies: the same identities, and the Work is done.
  std::vector<float> hostCopy = host, hostOut(n, 0.f);
  BufferView hostView{hostCopy.data(), n, DType::kF32, Device::kCpu};
  BufferView hostOutView{hostOut.data(), n, DType::kF32, Device::kCpu};
  auto w = pg.allreduce(hostView, ReduceOp::kAvg);
  CHECK(w->isCompleted());
  w->wait();
  pg.reduceScatter(v, hostOutView, {n})->wait();  // device in, host out
  CHECK(hostCopy == host);
  CHECK(hostOut == host);
  cudaFree(d);
  cudaFree(d2);
}

TEST_CASE("nccl backend: a collective runs after the caller's default-stream writes", "[gpu]") {
  if (cudaDeviceCount() == 0) DS_SKIP("no CUDA device");
  ProcessGroup pg(createBackend("nccl", std::make_shared<HashStore>(), 0, 1, {}));
  // 256 MiB: the asynchronous memset on stream 0 is still running when the copy is enqueued on
  // the group's (non-blocking) stream, which without the event wait would read the old zeros.
  const size_t n = size_t{64} << 20;
  float *src = nullptr, *dst = nullptr;
  REQUIRE(cudaMalloc(&src, n * sizeof(float)) == cudaSuccess);
  REQUIRE(cudaMalloc(&dst, n * sizeof(float)) == cudaSuccess);
  for (int round = 0; round < 3; ++round) {
    REQUIRE(cudaMemset(src, 0, n * sizeof(float)) == cudaSuccess);
    REQUIRE(cudaMemset(dst, 0, n * sizeof(float)) == cudaSuccess);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    REQUIRE(cudaMemsetAsync(src, 0x3f, n * sizeof(float), 0) == cudaSuccess);  // producer
    BufferView in{src, n, DType::kF32, Device::kCuda}, out{dst, n, DType::kF32, Device::kCuda};
    pg.reduceScatter(in, out, {n})->wait();
    std::vector<uint32_t> back(n);
    REQUIRE(cudaMemcpy(back.data(), dst, n * 4, cudaMemcpyDeviceToHost) == cudaSuccess);
    size_t stale = 0;
    for (uint32_t w : back) stale += w != 0x3f3f3f3fu;
    INFO("round " << round);
    CHECK(stale == 0);
  }
  cudaFree(src);
  cudaFree(dst);
}

TEST_CASE("nccl backend: more local ranks than GPUs is refused before NCCL, naming both counts",
          "[unit]") {
  CHECK_NOTHROW(checkOneRankPerDevice(1, 1, "rank 0 on h (LOCAL_RANK=0)", ""));
  CHECK_NOTHROW(checkOneRankPerDevice(4, 8, "rank 0 on h (LOCAL_RANK=0)", "0,1,2,3"));
  try {
    checkOneRankPerDevice(2, 1, "rank 1 on node7 (LOCAL_RANK=1)", "3");
    FAIL("expected a ConfigError");
  } catch (const ConfigError& e) {
    std::string what = e.what();
    CHECK_THAT(what, Catch::Contains("rank 1 on node7 (LOCAL_RANK=1)"));
    CHECK_THAT(what, Catch::Contains("one of 2 local ranks"));
    CHECK_THAT(what, Catch::Contains("sees 1 CUDA device(s)"));
    CHECK_THAT(what, Catch::Contains("CUDA_VISIBLE_DEVICES='3'"));
    CHECK_THAT(what, Catch::Contains("--comm_backend gloo"));
    CHECK_THAT(what, Catch::Contains("train.device_sharing"));
  }
  CHECK_THROWS_WITH(checkOneRankPerDevice(3, 2, "r", ""),
                    Catch::Contains("CUDA_VISIBLE_DEVICES=unset"));
}
