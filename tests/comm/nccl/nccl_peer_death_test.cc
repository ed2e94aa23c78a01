// A peer SIGKILLed mid-allreduce on the nccl backend [gpu]: every survivor fails within seconds
// with a CommError naming it (the liveness watchdog aborts the communicator), both for an
// ordinary rank and for rank 0, whose death also takes the store down. Mirrors the conformance
// test of the CPU backends. Ranks are fresh processes (tests/comm/nccl/nccl_child.h): one per GPU
// with two or more, two simulated hosts on one GPU otherwise; the parent never touches CUDA.
#include <catch2/catch.hpp>

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "comm/nccl/nccl_backend.h"
#include "comm/process_group.h"
#include "comm/registry.h"
#include "core/error.h"
#include "tests/comm/nccl/nccl_child.h"
#include "tests/support/skip.h"
#include "tests/support/spawn_ranks.h"

#include <cuda_runtime.h>

using namespace ds;
using namespace ds::comm;
using Clock = std::chrono::steady_clock;

namespace {

using ds::test::nccl_child::env;

const char* kChildTest = "nccl child: a rank of the peer-death test";
const char* kProbeTest = "nccl child: device count probe";

// CUDA devices, counted in a fresh process so this one stays CUDA-free.
int deviceCountInChild() {
  ds::test::TempDir dir;
  std::string out;
  int rc = ds::test::runCommand(fmt::format("DS_NCCL_CHILD_DIR={} '{}' '{}'", dir.path(),
                                            ds::test::nccl_child::selfExe(), kProbeTest),
                                &out, std::chrono::seconds(60));
  if (rc != 0) return 0;
  try {
    return std::stoi(ds::test::readFile(dir.file("devices")));
  } catch (...) {
    return 0;
  }
}

}  // namespace

TEST_CASE("nccl child: device count probe", "[.][nccl-child]") {
  ds::test::writeFile(env("DS_NCCL_CHILD_DIR") + "/devices", std::to_string(cudaDeviceCount()));
}

// One rank: a warm-up allreduce, "ready", then allreduces until one fails; the result file says
// how (and when, on the steady clock shared by the processes of this host).
TEST_CASE("nccl child: a rank of the peer-death test", "[.][nccl-child]") {
  namespace child = ds::test::nccl_child;
  const child::ChildRank me = child::childRank();
  const std::string& dir = me.dir;
  const int r = me.rank;
  std::string result;
  try {
    ProcessGroup pg(createBackend("nccl", child::childStore(me, "nccl-death-test"), r, me.world,
                                  child::childGroupOptions()));
    const size_t count = size_t{16} << 20;  // 64 MiB of fp32: each allreduce takes a while
    float* d = nullptr;
    if (cudaMalloc(&d, count * sizeof(float)) != cudaSuccess) throw Error("cudaMalloc");
    BufferView v{d, count, DType::kF32, Device::kCuda};
    pg.allreduce(v, ReduceOp::kSum)->wait();
    ds::test::writeFile(dir + "/ready" + std::to_string(r), "1");
    auto start = Clock::now();
    try {
      while (Clock::now() - start < std::chrono::seconds(60)) {
        pg.allreduce(v, ReduceOp::kSum)->wait(std::chrono::seconds(60));
      }
      result = "no failure seen";
    } catch (const CommError& e) {
      result = fmt::format("CommError peer={} at={} what={}", e.peer(),
                           Clock::now().time_since_epoch().count(), e.what());
      // Written before the group's teardown, which must not hang either (the parent's deadline
      // would then show it as a timed-out rank).
      ds::test::writeFile(dir + "/result" + std::to_string(r), result);
    }
  } catch (const std::exception& e) {
    result = fmt::format("other exception: {}", e.what());
  }
  ds::test::writeFile(dir + "/result" + std::to_string(r), result);
}

TEST_CASE("nccl: a peer SIGKILLed mid-allreduce fails every survivor with CommError naming it",
          "[gpu]") {
  int devices = deviceCountInChild();
  if (devices < 1) DS_SKIP("needs a CUDA device, " << devices << " visible");
  const int n = ds::test::nccl_child::worldFor(devices);
  const auto bound = std::chrono::seconds(10);
  for (int victim : {n - 1, 0}) {
    INFO("world " << n << " (" << ds::test::nccl_child::placement(devices) << "), victim rank "
                  << victim);
    ds::test::TempDir dir;
    int64_t killedAt = 0;
    ds::test::nccl_child::Spawn spawn;
    spawn.childCase = kChildTest;
    spawn.dir = dir.path();
    spawn.world = n;
    spawn.devices = devices;
    spawn.extraEnv = {{"DS_NCCL_PEER_TIMEOUT", "3"}};
    auto res = ds::test::nccl_child::spawnRanks(spawn, [&](const std::vector<pid_t>& pids) {
      auto deadline = Clock::now() + std::chrono::seconds(90);
      auto allReady = [&] {
        for (int r = 0; r < n; ++r)
          if (!std::filesystem::exists(dir.file("ready" + std::to_string(r)))) return false;
        return true;
      };
      while (!allReady() && Clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      killedAt = Clock::now().time_since_epoch().count();
      ::kill(pids[victim], SIGKILL);
    });
    CHECK(res[victim].signal == SIGKILL);
    for (int r = 0; r < n; ++r) {
      if (r == victim) continue;
      std::string text;
      try {
        text = ds::test::readFile(dir.file("result" + std::to_string(r)));
      } catch (...) {
      }
      INFO("rank " << r << ": " << text);
      CHECK_FALSE(res[r].timedOut);
      REQUIRE_THAT(text, Catch::StartsWith(fmt::format("CommError peer={} ", victim)));
      CHECK_THAT(text, Catch::Contains(fmt::format("rank {}", victim)));
      auto atPos = text.find("at=") + 3;
      auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
          Clock::duration(std::stoll(text.substr(atPos)) - killedAt));
      CHECK(took < bound);
    }
  }
}
