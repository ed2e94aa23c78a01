// `dsrt check`, `dsrt train --check` and `dsrun ... train --check` on DeepSpeed-style config files
// (tests/data/ds_config): exit 0 with the effective config (each key's value and origin) for the
// world size the launch would have, or 2 naming every refused key; a refused config starts
// nothing and writes nothing (no checkpoint or monitor folder appears); the ZeRO formula's memory
// per rank, and a plan over train.memory_limit_mb refused as the trainer would.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include "ds/config.h"
#include "tests/support/spawn_ranks.h"

using ds::test::runCommand;
using ds::test::TempDir;
using ds::test::writeFile;

namespace {

const std::string kData = std::string(DS_TEST_DATA_DIR) + "/ds_config/";
const std::string kEnv = "env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u MASTER_ADDR -u MASTER_PORT ";

std::string dsrt() { return kEnv + std::string(DS_BINARY_DIR) + "/dsrt"; }
std::string dsrun() { return kEnv + std::string(DS_BINARY_DIR) + "/dsrun"; }

// A plan over a data file, with a checkpoint folder and a csv monitor inside dir.
std::string writePlan(const TempDir& dir, const std::string& dsFile) {
  const std::string plan = dir.file("plan.yaml");
  writeFile(plan,
            "model:\n  gpt: {n_layer: 1, n_head: 2, n_embd: 16, seq_len: 8, vocab_size: 32}\n"
            "train: {steps: 2, checkpoint: {dir: " +
                dir.file("ck") + "}}\ndeepspeed_config: " + kData + dsFile + "\n");
  return plan;
}

}  // namespace

TEST_CASE("dsrt check prints the effective config with origins and exits 0", "[unit]") {
  TempDir dir;
  const std::string plan = writePlan(dir, "hf_zero3_auto.json");
  std::string out;
  REQUIRE(runCommand(dsrt() + " check " + plan + " --world_size 4", &out) == 0);
  INFO(out);
  CHECK(out.find("effective config of " + plan + " for world size 4") != std::string::npos);
  CHECK(out.find("deepspeed.train_batch_size") != std::string::npos);
  CHECK(out.find(" 32 ") != std::string::npos);  // 4 x 2 x 4
  CHECK(out.find("auto (derived)") != std::string::npos);
  CHECK(out.find("ok: the plan and its DeepSpeed config are valid for world size 4") !=
        std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir.file("ck")));
  // train --check is the same check, for the environment's world size
  REQUIRE(runCommand(dsrt() + " train " + plan + " --check --set train.steps=5", &out) == 0);
  CHECK(out.find("for world size 1") != std::string::npos);
  CHECK(out.find("--set") != std::string::npos);  // train.steps came from --set
  CHECK_FALSE(std::filesystem::exists(dir.file("ck")));
}

TEST_CASE("dsrt check and train refuse a config naming every refused key; nothing is written",
          "[unit]") {
  TempDir dir;
  const std::string plan = writePlan(dir, "refused_many.json");
  for (const std::string& cmd : {dsrt() + " check " + plan, dsrt() + " train " + plan}) {
    std::string out;
    CHECK(runCommand(cmd, &out) == 2);
    INFO(out);
    CHECK(out.find("8 problems in the DeepSpeed config:") != std::string::npos);
    CHECK(out.find(kData + "refused_many.json:13:16: deepspeed.amp.enabled:") != std::string::npos);
    CHECK(out.find(kData + "refused_many.json:25:3: deepspeed.gradient_clippin: unknown key") !=
          std::string::npos);
    CHECK(out.find("step ") == std::string::npos);  // no training step ran
    CHECK_FALSE(std::filesystem::exists(dir.file("ck")));
  }
}

TEST_CASE("dsrt check estimates memory per rank and refuses a plan over train.memory_limit_mb",
          "[unit]") {
  TempDir dir;
  const std::string plan = dir.file("big.yaml");
  // 12 x 768, vocab 50257: 123702528 params; fp32 stage 0 states 16 bytes each = 1888 MiB.
  writeFile(plan,
            "model:\n  gpt: {n_layer: 12, n_head: 12, n_embd: 768, seq_len: 64, vocab_size: "
            "50257}\ntrain: {steps: 2, device: cpu}\ndeepspeed: {train_batch_size: 4}\n");
  std::string out;
  REQUIRE(runCommand(dsrt() + " check " + plan, &out) == 0);
  INFO(out);
  CHECK(out.find("memory per rank (ZeRO formula, 123702528 params at stage 0 over 1 rank(s), "
                 "before buffers): params 472 MiB, grads 472, optimizer states 944") !=
        std::string::npos);
  CHECK(out.find("train.memory_limit_mb not set") != std::string::npos);
  // Over the plan's limit: refused with the trainer's message, the settings that would fit.
  CHECK(runCommand(dsrt() + " check " + plan + " --set train.memory_limit_mb=1000", &out) == 2);
  CHECK(out.find("memory: the plan needs") != std::string::npos);
  CHECK(out.find("but train.memory_limit_mb (1000 MiB per rank) allows 1000 MiB") !=
        std::string::npos);
  CHECK(out.find("settings that would fit: zero_optimization.stage") != std::string::npos);
  // ZeRO-3 over 4 ranks: a quarter of the states, within the same limit.
  REQUIRE(runCommand(dsrt() + " check " + plan +
                         " --world_size 4 --set train.memory_limit_mb=1000 --set "
                         "deepspeed.train_batch_size=8 --set deepspeed.zero_optimization.stage=3",
                     &out) == 0);
  CHECK(out.find("at stage 3 over 4 rank(s)") != std::string::npos);
  CHECK(out.find("train.memory_limit_mb 1000 (fits)") != std::string::npos);
  // The limit is host memory: a device run's states are not checked against it.
  REQUIRE(runCommand(dsrt() + " check " + plan +
                         " --set train.memory_limit_mb=1000 --set train.device=cuda",
                     &out) == 0);
  CHECK(out.find("(not checked: a device run's states are on the device)") != std::string::npos);
}

TEST_CASE("dsrun train --check checks for the launch's world size and starts no rank", "[unit]") {
  TempDir dir;
  const std::string plan = writePlan(dir, "bfloat16_block.json");  // micro 2 x gas 2
  std::string out;
  REQUIRE(
      runCommand("cd " + dir.path() + " && " + dsrun() + " --num_gpus 3 train " + plan + " --check",
                 &out) == 0);
  INFO(out);
  CHECK(out.find("for world size 3") != std::string::npos);
  CHECK(out.find("deepspeed.train_batch_size") != std::string::npos);
  CHECK(out.find(" 12 ") != std::string::npos);  // 2 x 2 x 3
  CHECK_FALSE(std::filesystem::exists(dir.file("ck")));
  // the batch triangle that cannot hold for that world size is refused (exit 2)
  const std::string fixed = writePlan(dir, "legacy_cpu_offload.json");  // train 16, gas 1
  CHECK(runCommand(dsrun() + " --num_gpus 3 train " + fixed + " --check", &out) == 2);
  CHECK(out.find("Check batch related parameters") != std::string::npos);
}

TEST_CASE("DeepSpeed-style configs train: Lamb, legacy cpu_offload with fp16, NVMe with aio",
          "[unit]") {
  TempDir dir;
  for (const char* file : {"lamb.json", "legacy_cpu_offload.json", "aio_nvme.json"}) {
    const std::string plan = writePlan(dir, file);
    std::string out;
    // aio_nvme.json's nvme_path is relative: the swap files go under the run's folder
    const int rc = runCommand("cd " + dir.path() + " && " + dsrt() + " train " + plan +
                                  " --set train.steps=20 --set deepspeed.train_batch_size=8"
                                  " --set deepspeed.train_micro_batch_size_per_gpu=null"
                                  " --set deepspeed.gradient_accumulation_steps=null",
                              &out);
    INFO(file << "\n" << out);
    CHECK(rc == 0);
    CHECK(out.find("done: 20 steps") != std::string::npos);
    const size_t first = out.find("| loss "), last = out.find("final loss ");
    REQUIRE(first != std::string::npos);
    REQUIRE(last != std::string::npos);
    CHECK(std::stod(out.substr(last + 11)) < std::stod(out.substr(first + 7)));
  }
}

TEST_CASE("DeepSpeed's --deepspeed --deepspeed_config FILE name the config, relative to cwd",
          "[unit]") {
  TempDir dir;
  std::filesystem::create_directories(dir.file("run"));
  std::filesystem::copy_file(kData + "bfloat16_block.json", dir.file("run/my ds.json"));
  const std::string plan = dir.file("plan.yaml");
  writeFile(plan,
            "model:\n  gpt: {n_layer: 1, n_head: 2, n_embd: 16, seq_len: 8, vocab_size: 32}\n");
  std::string out;
  // The file is found from the current folder (not the plan's), a space in its name included,
  // and --set deepspeed.* still applies on top of it.
  REQUIRE(runCommand("cd " + dir.file("run") + " && " + dsrt() + " train " + plan +
                         " --deepspeed --deepspeed_config 'my ds.json' --check"
                         " --set deepspeed.gradient_accumulation_steps=3",
                     &out) == 0);
  INFO(out);
  CHECK(out.find("deepspeed.train_batch_size") != std::string::npos);
  auto lineOf = [&](const std::string& key) {
    const size_t at = out.find(key + " ");
    return at == std::string::npos ? std::string() : out.substr(at, out.find('\n', at) - at);
  };
  CHECK_THAT(lineOf("deepspeed.train_batch_size"), Catch::Matches(".* 6 +derived"));  // 2 x 3 x 1
  CHECK_THAT(lineOf("deepspeed.gradient_accumulation_steps"), Catch::Matches(".* 3 +--set"));
  CHECK_THAT(lineOf("deepspeed.bf16.enabled"), Catch::Matches(".* true +ds_config.*"));
  // Without a plan file the built-in plan's deepspeed block gives way to the file.
  REQUIRE(runCommand("cd " + dir.file("run") + " && " + dsrt() +
                         " train --deepspeed_config 'my ds.json' --check",
                     &out) == 0);
  CHECK_THAT(lineOf("deepspeed.bf16.enabled"), Catch::Matches(".* true +ds_config.*"));
  CHECK_THAT(lineOf("deepspeed.gradient_accumulation_steps"), Catch::Matches(".* 2 +ds_config"));
  // dsrun's check mode (dsrt check) takes them too, for the launch's world size.
  REQUIRE(runCommand("cd " + dir.file("run") + " && " + dsrun() +
                         " --num_gpus 2 train --deepspeed --deepspeed_config 'my ds.json' --check",
                     &out) == 0);
  CHECK_THAT(lineOf("deepspeed.train_batch_size"), Catch::Matches(".* 8 +derived"));  // 2 x 2 x 2
  // A missing file is named; a plan that also has a deepspeed block is refused.
  CHECK(runCommand("cd " + dir.path() + " && " + dsrt() + " train " + plan +
                       " --deepspeed_config nope.json --check",
                   &out) == 2);
  CHECK(out.find(dir.file("nope.json")) != std::string::npos);
  writeFile(plan,
            "model:\n  gpt: {n_layer: 1, n_head: 2, n_embd: 16, seq_len: 8, vocab_size: "
            "32}\ndeepspeed: {train_batch_size: 2}\n");
  CHECK(runCommand(dsrt() + " train " + plan + " --deepspeed_config " + kData + "lamb.json --check",
                   &out) == 2);
  CHECK(out.find("give either deepspeed or deepspeed_config") != std::string::npos);
}
