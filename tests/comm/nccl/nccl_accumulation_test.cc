// fp32 accumulation in the nccl backend. [gpu]: the staging kernels narrow exactly as the host
// conversions do (round to nearest even, ties included), and the shared conformance checks run
// against nccl through DeviceMirror: every collective x dtype x op (runAll), and fp16/bf16 inputs
// where only fp32 accumulation gives the reference (runHalfAccumulation: one rank holds 2048 / 256
// at element i, the others 1); then the same collectives handed host buffers directly (staged
// through device copies by the backend). With two or more GPUs the checks run on thread ranks,
// one device each, and on process ranks; with one GPU on two processes as simulated hosts on it
// (tests/comm/nccl/nccl_child.h). Without a GPU these tests are skipped (DS_SKIP).
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "comm/nccl/half_staging.h"
#include "comm/nccl/nccl_backend.h"
#include "comm/registry.h"
#include "comm/store/hash_store.h"
#include "comm/store/prefix_store.h"
#include "core/dtype.h"
#include "tests/comm/conformance_check.h"
#include "tests/comm/nccl/device_mirror.h"
#include "tests/comm/nccl/nccl_child.h"
#include "tests/support/skip.h"
#include "tests/support/spawn_ranks.h"

using namespace ds;
using namespace ds::comm;
using namespace ds::test::conformance;

namespace {

// Runs body on min(devices, 4) thread ranks, each a DeviceMirror over nccl (rank r on device r).
std::string onGpuThreads(int n, const std::function<std::string(ProcessGroup&)>& body) {
  auto store = std::make_shared<HashStore>();
  std::vector<std::string> errs(n);
  GroupOptions o;
  o.timeout = std::chrono::seconds(60);
  ds::test::runRanks(n, [&](int r) {
    ProcessGroup pg(
        std::make_unique<ds::test::DeviceMirror>(createBackend("nccl", store, r, n, o)));
    errs[r] = body(pg);
  });
  std::string all;
  for (auto& e : errs) all += e;
  return all;
}

const char* kConformanceChild = "nccl child: a conformance rank";

// Every conformance check on this rank, all dtypes and ops, then fp16/bf16 accumulation.
std::string conformanceChecks(ProcessGroup& pg) {
  return runAll(pg, allDtypes(), allOps(), {3, 1031}) + runHalfAccumulation(pg, DType::kF16) +
         runHalfAccumulation(pg, DType::kBF16);
}

// The same collectives handed host buffers directly: nccl stages them through device copies
// (comm/nccl/host_staging.h); send/recv stay device-only.
std::string hostBufferChecks(ProcessGroup& pg) {
  return "[host buffers] " + runAll(pg, allDtypes(), allOps(), {3, 1031}, /*withP2P=*/false);
}

}  // namespace

// One process rank of the conformance test: a TcpStore (rank 0 hosts it), nccl under a
// DeviceMirror, every check; "result<rank>" holds the failures ("" when none).
TEST_CASE("nccl child: a conformance rank", "[.][nccl-child]") {
  namespace child = ds::test::nccl_child;
  const child::ChildRank me = child::childRank();
  std::string result;
  try {
    auto store = child::childStore(me, "nccl-conformance-test");
    const GroupOptions go = child::childGroupOptions();
    ProcessGroup pg(std::make_unique<ds::test::DeviceMirror>(createBackend(
        "nccl", std::make_shared<PrefixStore>("mirror", store), me.rank, me.world, go)));
    result = conformanceChecks(pg);
    ProcessGroup hostPg(
        createBackend("nccl", std::make_shared<PrefixStore>("host", store), me.rank, me.world, go));
    std::string host = hostBufferChecks(hostPg);
    if (host != "[host buffers] ") result += host;
    pg.barrier()->wait(std::chrono::seconds(60));  // rank 0's store outlives every reader
  } catch (const std::exception& e) {
    result = fmt::format("exception: {}", e.what());
  }
  ds::test::writeFile(me.dir + "/result" + std::to_string(me.rank), result);
  REQUIRE(result.empty());
}

TEST_CASE("nccl fp32 staging: narrowing rounds to nearest even like the host conversion", "[gpu]") {
  if (cudaDeviceCount() == 0) DS_SKIP("no CUDA device");
  std::vector<float> in{2049.0f,  2051.0f,  2050.5f, 257.0f, 259.0f, 65504.0f,
                        65520.0f, -2049.0f, 1e-8f,   0.0f,   -0.0f,  3.0f};
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-70000.0f, 70000.0f);
  for (int i = 0; i < 4096; ++i) in.push_back(dist(rng));
  const size_t n = in.size();
  float *dIn = nullptr, *dWide = nullptr;
  uint16_t* dOut = nullptr;
  REQUIRE(cudaMalloc(&dIn, n * 4) == cudaSuccess);
  REQUIRE(cudaMalloc(&dWide, n * 4) == cudaSuccess);
  REQUIRE(cudaMalloc(&dOut, n * 2) == cudaSuccess);
  REQUIRE(cudaMemcpy(dIn, in.data(), n * 4, cudaMemcpyHostToDevice) == cudaSuccess);
  for (bool bf16 : {false, true}) {
    INFO((bf16 ? "bf16" : "fp16"));
    for (float divisor : {1.0f, 3.0f}) {
      nccl_impl::launchNarrow(dIn, dOut, n, bf16, divisor, 0);
      std::vector<uint16_t> got(n);
      REQUIRE(cudaMemcpy(got.data(), dOut, n * 2, cudaMemcpyDeviceToHost) == cudaSuccess);
      size_t bad = 0;
      for (size_t i = 0; i < n; ++i) {
        float q = in[i] / divisor;
        uint16_t want = bf16 ? floatToBf16(q).bits : floatToFp16(q).bits;
        bad += got[i] != want;
      }
      CHECK(bad == 0);
      // Widening back is exact: narrow(widen(h)) == h.
      nccl_impl::launchWiden(dOut, dWide, n, bf16, 0);
      nccl_impl::launchNarrow(dWide, dOut, n, bf16, 1.0f, 0);
      std::vector<uint16_t> again(n);
      REQUIRE(cudaMemcpy(again.data(), dOut, n * 2, cudaMemcpyDeviceToHost) == cudaSuccess);
      CHECK(again == got);
    }
  }
  cudaFree(dIn);
  cudaFree(dWide);
  cudaFree(dOut);
}

TEST_CASE("nccl conformance on device buffers, fp16/bf16 accumulated in fp32", "[gpu]") {
  int devices = cudaDeviceCount();
  if (devices < 1) DS_SKIP("needs a CUDA device, " << devices << " visible");
  if (devices >= 2) {
    for (int n = 2; n <= std::min(devices, 4); ++n) {
      INFO("world " << n << ", thread ranks, one GPU each");
      CHECK(onGpuThreads(n, conformanceChecks) == "");
    }
  }
  INFO("world 2: " << ds::test::nccl_child::placement(devices));
  ds::test::TempDir dir;
  ds::test::nccl_child::Spawn spawn;
  spawn.childCase = kConformanceChild;
  spawn.dir = dir.path();
  spawn.world = ds::test::nccl_child::worldFor(devices);
  spawn.devices = devices;
  spawn.timeout = std::chrono::seconds(200);
  auto res = ds::test::nccl_child::spawnRanks(spawn);
  for (int r = 0; r < spawn.world; ++r) {
    std::string text = "(no result file)";
    try {
      text = ds::test::readFile(dir.file("result" + std::to_string(r)));
    } catch (...) {
    }
    INFO("rank " << r << ": " << text);
    CHECK_FALSE(res[r].timedOut);
    CHECK(res[r].exited);
    CHECK(res[r].exitCode == 0);
    CHECK(text.empty());
  }
}
