// dsrt end to end with a real symlink planted at each predictable name it writes, by a shell
// that then execs dsrt (so $$ is dsrt's pid, as an attacker guessing the pid would name it): the
// NVMe swap file under nvme_path, a checkpoint temp file, the --summary temp file. Each run exits
// non-zero with the path in the message, and the link's target is untouched. (Before, a symlink
// at the swap name made training write through it, diverge to NaN and still exit 0.)
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "ds/config.h"
#include "tests/support/spawn_ranks.h"

using ds::test::runCommand;
using ds::test::TempDir;

namespace {

// `plant` (a shell command using $$) runs first, then dsrt as a single rank in the same process.
std::string plantThenTrain(const std::string& plant, const std::string& args) {
  const std::string dsrt = std::string(DS_BINARY_DIR) + "/dsrt";
  return "sh -c '" + plant + " && exec env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u MASTER_ADDR " +
         "-u MASTER_PORT " + dsrt + " " + args + "'";
}

}  // namespace

TEST_CASE("dsrt files: a symlink planted at a swap, checkpoint or summary name stops the run",
          "[unit]") {
  TempDir dir;
  {
    std::ofstream f(dir.file("text.txt"), std::ios::binary);
    for (int i = 0; i < 400; ++i) f << "the quick brown fox " << i % 7 << " jumps over the dog\n";
  }
  std::string out;
  REQUIRE(runCommand(plantThenTrain("true", "prepare-data " + dir.file("text.txt") + " " +
                                                dir.file("d/tok") + " --shard_tokens 6000"),
                     &out) == 0);
  const std::string plan = dir.file("plan.yaml");
  {
    std::ofstream f(plan);
    f << "model:\n  gpt: {n_layer: 1, n_head: 2, n_embd: 16, seq_len: 16, vocab_size: 256}\n"
      << "data:\n  shards: \"" << dir.file("d/tok_train_*.bin") << "\"\n"
      << "train: {steps: 4, checkpoint: {dir: " << dir.file("ck") << ", every: 2}}\n"
      << "deepspeed: {train_batch_size: 4, optimizer: {type: AdamW, params: {lr: 0.01}}, "
      << "zero_optimization: {stage: 2, offload_optimizer: {device: nvme, nvme_path: "
      << dir.file("nvme") << "}}}\n";
  }
  std::filesystem::create_directories(dir.file("nvme"));
  std::filesystem::create_directories(dir.file("ck/global_step2"));
  const std::string victim = dir.file("victim");
  ds::test::writeFile(victim, "precious\n");
  struct Case {
    std::string name;     // the planted name, with $$ for dsrt's pid
    std::string message;  // what the error names
  };
  const Case cases[] = {
      {dir.file("nvme/zero_rank0_pid$$_exp_avg.swp"), "nvme swap file " + dir.file("nvme/")},
      {dir.file("ck/global_step2/optim_rank_00000.safetensors.tmp.$$"),
       "checkpoint: temp file " + dir.file("ck/global_step2/optim_rank_00000.safetensors.tmp.")},
      {dir.file("s.json.tmp.$$"), "--summary (temp file) " + dir.file("s.json.tmp.")},
  };
  for (const auto& c : cases) {
    INFO(c.name);
    const int rc = runCommand(plantThenTrain("ln -s " + victim + " " + c.name,
                                             "train " + plan + " --summary " + dir.file("s.json")),
                              &out);
    INFO(out);
    CHECK(rc == 2);
    CHECK(out.find(c.message) != std::string::npos);
    CHECK(out.find("refusing to write through a symbolic link to '" + victim + "'") !=
          std::string::npos);
    CHECK(ds::test::readFile(victim) == "precious\n");
    CHECK_FALSE(std::filesystem::exists(dir.file("s.json")));
  }
  // Without a planted name the same plan trains, checkpoints and writes its summary.
  REQUIRE(runCommand(plantThenTrain("true", "train " + plan + " --summary " + dir.file("s.json")),
                     &out) == 0);
  CHECK(std::filesystem::exists(dir.file("s.json")));
  CHECK(std::filesystem::exists(dir.file("ck/global_step4/manifest.json")));
}
