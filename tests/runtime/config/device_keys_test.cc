// The plan keys of the rank's device (docs/gpu.md): train.device (auto|cpu|cuda),
// train.device_sharing and train.tf32 - defaults, values from the plan file and from --set, the
// errors for bad values (file:line:col or --set, the key, the allowed values), and `dsrt check`.
#include <catch2/catch.hpp>

#include "core/error.h"
#include "runtime/config/effective_config.h"
#include "runtime/config/plan_loader.h"

using namespace ds::runtime;

namespace {
const std::string kMini = R"(model:
  gpt: {n_layer: 1, n_head: 2, n_embd: 16, seq_len: 8, vocab_size: 32}
deepspeed:
  train_batch_size: 8
)";

std::string errorOf(const std::string& yaml, std::vector<std::string> sets = {}) {
  try {
    parsePlan(yaml, "plan.yaml", sets, 1);
  } catch (const ds::ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

std::string effective(const Plan& p, const std::string& key) {
  for (const auto& k : effectiveConfig(p))
    if (k.path == key) return k.value + " " + k.origin;
  return "(missing)";
}
}  // namespace

TEST_CASE("plan: train.device defaults to auto, no sharing, no TF32", "[unit]") {
  Plan p = parsePlan(kMini, "mini");
  CHECK(p.train.device == "auto");
  CHECK_FALSE(p.train.deviceSharing);
  CHECK_FALSE(p.train.tf32);
  Plan d = loadPlan({});
  CHECK(d.train.device == "auto");
  CHECK(effective(p, "train.device") == "\"auto\" default");
  CHECK(effective(p, "train.device_sharing") == "false default");
  CHECK(effective(p, "train.tf32") == "false default");
}

TEST_CASE("plan: train.device, device_sharing and tf32 from the plan file", "[unit]") {
  for (const char* mode : {"auto", "cpu", "cuda"}) {
    Plan p = parsePlan(kMini + "train: {device: " + mode + ", device_sharing: true, tf32: true}\n",
                       "plan.yaml");
    CHECK(p.train.device == mode);
    CHECK(p.train.deviceSharing);
    CHECK(p.train.tf32);
    CHECK(effective(p, "train.device") == "\"" + std::string(mode) + "\" plan");
    CHECK(effective(p, "train.tf32") == "true plan");
  }
}

TEST_CASE("plan: train.device keys from --set", "[unit]") {
  Plan p = parsePlan(kMini, "plan.yaml",
                     {"train.device=cpu", "train.device_sharing=true", "train.tf32=true"});
  CHECK(p.train.device == "cpu");
  CHECK(p.train.deviceSharing);
  CHECK(p.train.tf32);
  CHECK(effective(p, "train.device") == "\"cpu\" --set");
  // --set wins over the file.
  Plan q = parsePlan(kMini + "train: {device: cuda}\n", "plan.yaml", {"train.device=auto"});
  CHECK(q.train.device == "auto");
}

TEST_CASE("plan: bad train.device values name the key, the place and the choices", "[unit]") {
  CHECK(errorOf(kMini + "train:\n  device: gpu\n") ==
        "plan.yaml:6:11: train.device: expected one of auto, cpu, cuda, got 'gpu'");
  CHECK(errorOf(kMini, {"train.device=CUDA"}) ==
        "--set train.device: expected one of auto, cpu, cuda, got 'CUDA'");
  CHECK(errorOf(kMini, {"train.device=cuda:1"}) ==
        "--set train.device: expected one of auto, cpu, cuda, got 'cuda:1'");
  CHECK(errorOf(kMini + "train:\n  device_sharing: 2\n") ==
        "plan.yaml:6:19: train.device_sharing: expected true or false, got '2'");
  CHECK(errorOf(kMini, {"train.tf32=maybe"}) ==
        "--set train.tf32: expected true or false, got 'maybe'");
  CHECK(errorOf(kMini, {"train.devices=cpu"}).find("train.devices: unknown key") !=
        std::string::npos);
}
