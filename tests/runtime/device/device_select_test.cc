// selectDevice and parseLocalRank without a GPU: every branch of train.device (auto, cpu, cuda),
// too few devices with and without train.device_sharing, and the error texts (key, rank, host,
// counts, CUDA_VISIBLE_DEVICES when known); LOCAL_RANK's checked parse through the knob registry.
#include <catch2/catch.hpp>

#include "core/error.h"
#include "runtime/device/device_select.h"

using namespace ds::runtime;
using Catch::Matchers::Contains;

namespace {

DeviceSite site(int localRank, int localSize, int visible, std::string whyNone = "") {
  DeviceSite s;
  s.rank = 4 + localRank;
  s.localRank = localRank;
  s.localSize = localSize;
  s.host = "node-b";
  s.visibleDevices = visible;
  s.whyNone = std::move(whyNone);
  return s;
}

DeviceRequest request(std::string mode, bool sharing = false) {
  DeviceRequest r;
  r.mode = std::move(mode);
  r.allowSharing = sharing;
  return r;
}

std::string errorOf(const DeviceRequest& r, const DeviceSite& s) {
  try {
    selectDevice(r, s);
  } catch (const ds::ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("device: auto takes cuda:<LOCAL_RANK> when devices are visible", "[unit]") {
  DeviceChoice c = selectDevice(request("auto"), site(1, 2, 2));
  CHECK(c.cuda);
  CHECK(c.index == 1);
  CHECK(c.name() == "cuda:1");
  CHECK(c.why == "cuda:1 (train.device auto, LOCAL_RANK 1, 2 visible device(s))");
  CHECK(selectDevice(request("auto"), site(0, 1, 8)).index == 0);
}

TEST_CASE("device: auto falls back to the CPU with the reason", "[unit]") {
  DeviceChoice c = selectDevice(request("auto"), site(0, 2, 0, "this build has no CUDA"));
  CHECK_FALSE(c.cuda);
  CHECK(c.index == -1);
  CHECK(c.name() == "cpu");
  CHECK(c.why == "cpu (train.device auto: this build has no CUDA)");
  CHECK(selectDevice(request("auto"), site(0, 1, 0)).why ==
        "cpu (train.device auto: no CUDA device is visible)");
}

TEST_CASE("device: cpu is the CPU whatever is visible", "[unit]") {
  for (int visible : {0, 1, 8}) {
    DeviceChoice c = selectDevice(request("cpu"), site(3, 4, visible));
    CHECK_FALSE(c.cuda);
    CHECK(c.why == "cpu (train.device cpu)");
  }
  // More local ranks than devices is no error on the CPU.
  CHECK_FALSE(selectDevice(request("cpu"), site(3, 4, 1)).cuda);
}

TEST_CASE("device: cuda takes cuda:<LOCAL_RANK>", "[unit]") {
  DeviceChoice c = selectDevice(request("cuda"), site(2, 4, 4));
  CHECK(c.cuda);
  CHECK(c.index == 2);
  CHECK(c.why == "cuda:2 (train.device cuda, LOCAL_RANK 2, 4 visible device(s))");
}

TEST_CASE("device: cuda without a device names the key, rank, host and why", "[unit]") {
  CHECK(errorOf(request("cuda"), site(1, 2, 0, "cudaGetDeviceCount: no CUDA-capable device")) ==
        "train.device is 'cuda' but rank 5 (LOCAL_RANK 1) on node-b sees no CUDA device: "
        "cudaGetDeviceCount: no CUDA-capable device. Check the driver (nvidia-smi) and "
        "CUDA_VISIBLE_DEVICES, or set train.device to auto or cpu");
  DeviceSite s = site(0, 1, 0, "this build has no CUDA (DS_HAVE_CUDA=0)");
  s.cudaVisibleDevices = "";
  CHECK_THAT(errorOf(request("cuda"), s),
             Contains("sees no CUDA device: this build has no CUDA (DS_HAVE_CUDA=0), "
                      "CUDA_VISIBLE_DEVICES=''."));
  CHECK_THAT(errorOf(request("cuda"), site(0, 1, 0)), Contains(": no CUDA device is visible."));
}

TEST_CASE("device: more local ranks than devices is an error naming both counts", "[unit]") {
  for (const char* mode : {"auto", "cuda"}) {
    CHECK(errorOf(request(mode), site(1, 4, 2)) ==
          "rank 5 (LOCAL_RANK 1) on node-b: 4 local ranks but 2 visible CUDA device(s); start at "
          "most 2 ranks per node, or set train.device_sharing: true to let ranks share a device "
          "(cuda:<LOCAL_RANK mod 2>; for tests)");
  }
  DeviceSite s = site(0, 3, 1);
  s.cudaVisibleDevices = "3";
  CHECK_THAT(errorOf(request("cuda"), s),
             Contains("3 local ranks but 1 visible CUDA device(s), CUDA_VISIBLE_DEVICES='3';"));
}

TEST_CASE("device: train.device_sharing puts ranks on LOCAL_RANK mod devices", "[unit]") {
  for (int lr = 0; lr < 4; ++lr) {
    DeviceChoice c = selectDevice(request("auto", true), site(lr, 4, 3));
    CHECK(c.cuda);
    CHECK(c.index == lr % 3);
  }
  DeviceSite s = site(3, 4, 2);
  s.cudaVisibleDevices = "0,1";
  CHECK(selectDevice(request("cuda", true), s).why ==
        "cuda:1 (train.device cuda, LOCAL_RANK 3, 2 visible device(s), shared: "
        "train.device_sharing, CUDA_VISIBLE_DEVICES='0,1')");
  // Sharing allowed but not needed: no "shared" note.
  CHECK(selectDevice(request("auto", true), site(0, 1, 1)).why ==
        "cuda:0 (train.device auto, LOCAL_RANK 0, 1 visible device(s))");
}

TEST_CASE("device: a mode the schema should have refused is an internal error", "[unit]") {
  CHECK_THROWS_AS(selectDevice(request("gpu"), site(0, 1, 1)), ds::InternalError);
}

TEST_CASE("device: siteText names rank, LOCAL_RANK and host", "[unit]") {
  CHECK(siteText(site(2, 4, 0)) == "rank 6 (LOCAL_RANK 2) on node-b");
}

TEST_CASE("device: LOCAL_RANK is parsed strictly, in [0, localSize)", "[unit]") {
  auto parse = [](const char* text, int localSize) {
    ds::EnvMap env{{"LOCAL_RANK", text}};
    return parseLocalRank(env, localSize);
  };
  auto errorFor = [&](const char* text, int localSize) -> std::string {
    try {
      parse(text, localSize);
    } catch (const ds::ConfigError& e) {
      return e.what();
    }
    return "(no error)";
  };
  CHECK(parseLocalRank(ds::EnvMap{}, 4) == 0);  // unset: 0
  CHECK(parse("0", 1) == 0);
  CHECK(parse("3", 4) == 3);
  CHECK(errorFor("4", 4) == "LOCAL_RANK='4': expected an integer in [0, 3]");
  CHECK(errorFor("-1", 4) == "LOCAL_RANK='-1': expected an integer in [0, 3]");
  CHECK(errorFor("1x", 4) == "LOCAL_RANK='1x': expected an integer in [0, 3]");
  CHECK(errorFor(" 1", 4) == "LOCAL_RANK=' 1': expected an integer in [0, 3]");
  CHECK(errorFor("+1", 4) == "LOCAL_RANK='+1': expected an integer in [0, 3]");
  CHECK(errorFor("", 4) == "LOCAL_RANK='': expected an integer in [0, 3]");
  CHECK(errorFor("99999999999999999999", 2) ==
        "LOCAL_RANK='99999999999999999999': expected an integer in [0, 1]");
  CHECK_THROWS_AS(parseLocalRank(ds::EnvMap{}, 0), ds::InternalError);
}
