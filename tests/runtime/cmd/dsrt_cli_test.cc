// The dsrt binary's data and checkpoint commands end to end on one rank: `prepare-data` turns a
// text into shards, `train` trains on them with --summary and --resume auto (and from an llm.c
// file via model.gpt.init_from), `export-checkpoint` writes the consolidated file; bad arguments
// exit 2 with a message naming the problem.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "ds/config.h"
#include "runtime/model/model.h"
#include "tests/support/spawn_ranks.h"

using ds::test::runCommand;
using ds::test::TempDir;

namespace {

std::string dsrt() { return std::string(DS_BINARY_DIR) + "/dsrt"; }

// No launcher environment: dsrt runs as a single rank without a process group.
std::string single(const std::string& args) {
  return "env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u MASTER_ADDR -u MASTER_PORT " + dsrt() + " " +
         args;
}

}  // namespace

TEST_CASE("dsrt prepare-data, train on the shards, export-checkpoint", "[unit]") {
  TempDir dir;
  {
    std::ofstream f(dir.file("text.txt"), std::ios::binary);
    for (int i = 0; i < 400; ++i) f << "the quick brown fox " << i % 7 << " jumps over the dog\n";
  }
  std::string out;
  REQUIRE(runCommand(single("prepare-data " + dir.file("text.txt") + " " + dir.file("d/tok") +
                            " --val_fraction 0.2 --shard_tokens 6000"),
                     &out) == 0);
  INFO(out);
  const auto size = std::filesystem::file_size(dir.file("text.txt"));
  CHECK(out.find("wrote " + dir.file("d/tok_train_000000.bin")) != std::string::npos);
  CHECK(out.find("wrote " + dir.file("d/tok_val_000000.bin")) != std::string::npos);
  CHECK(std::filesystem::exists(dir.file("d/tok_train_000001.bin")));  // 6000-token shards
  const size_t val = size_t(double(size) * 0.2);
  CHECK(out.find(std::to_string(size - val) + " train tokens, " + std::to_string(val) +
                 " val tokens") != std::string::npos);

  const std::string plan = dir.file("plan.yaml");
  {
    std::ofstream f(plan);
    f << "model:\n  gpt: {n_layer: 1, n_head: 2, n_embd: 16, seq_len: 16, vocab_size: 256}\n"
      << "data:\n  shards: \"" << dir.file("d/tok_train_*.bin") << "\"\n  val: \""
      << dir.file("d/tok_val_*.bin") << "\"\n"
      << "train: {steps: 4, eval_steps: 2, checkpoint: {dir: " << dir.file("ck") << ", every: 2}}\n"
      << "deepspeed: {train_batch_size: 4, optimizer: {type: AdamW, params: {lr: 0.01}}}\n";
  }
  REQUIRE(runCommand(single("train " + plan + " --resume auto --summary " + dir.file("s.json")),
                     &out) == 0);
  CHECK(out.find("step       4/4 | loss") != std::string::npos);
  auto summary = nlohmann::json::parse(ds::test::readFile(dir.file("s.json")));
  CHECK(summary["losses"].size() == 4);
  CHECK(summary["checkpoint"] == "global_step4");
  CHECK(summary["first_step"] == 0);
  // auto with a checkpoint present resumes it: nothing left to train at steps 4, one more at 5.
  REQUIRE(runCommand(single("train " + plan + " --resume auto --set train.steps=5"), &out) == 0);
  CHECK(out.find("resumed from " + dir.file("ck/global_step4")) != std::string::npos);
  CHECK(out.find("step       5/5 | loss") != std::string::npos);
  CHECK(out.find("step       1/5") == std::string::npos);
  // A resume with another data order is refused (exit 2) naming the fields.
  CHECK(runCommand(single("train " + plan + " --resume latest --set train.seed=99"), &out) == 2);
  CHECK(out.find("train.seed: checkpoint 1234, plan 99") != std::string::npos);

  REQUIRE(
      runCommand(single("export-checkpoint " + dir.file("ck") + " " + dir.file("m.safetensors")),
                 &out) == 0);
  CHECK(out.find("wrote " + dir.file("m.safetensors")) != std::string::npos);
  CHECK(out.find("from " + dir.file("ck") + "/global_step5 (step 5, 1 rank(s), ZeRO stage 0)") !=
        std::string::npos);
  const std::string st = ds::test::readFile(dir.file("m.safetensors"));
  REQUIRE(st.size() > 8);
  uint64_t n = 0;
  std::memcpy(&n, st.data(), 8);
  auto header = nlohmann::json::parse(st.substr(8, n));
  CHECK(header["wte"]["shape"] == nlohmann::json::array({256, 16}));
  CHECK(header["__metadata__"]["step"] == "5");
  // model.gpt.init_from, relative to the plan's folder: an llm.c file of the plan's shape starts
  // a fresh run; one of another width is refused (exit 2) naming the file and the field.
  for (int width : {16, 32}) {
    ds::runtime::ModelConfig m;
    m.nLayer = 1;
    m.nHead = 2;
    m.nEmbd = width;
    m.seqLen = 16;
    m.vocabSize = 256;
    auto model = ds::runtime::makeModel(m);
    std::vector<float> w(model->numParamsTotal());
    model->initParams(w.data(), 5);
    int32_t h[256] = {20240326, 3, 16, 256, 1, 2, width, 256};
    std::ofstream f(dir.file("gpt2_w" + std::to_string(width) + ".bin"), std::ios::binary);
    f.write(reinterpret_cast<const char*>(h), sizeof h);
    f.write(reinterpret_cast<const char*>(w.data()), std::streamsize(w.size() * 4));
  }
  const std::string fresh =
      " --set train.checkpoint.dir=" + dir.file("ck2") + " --set train.steps=1";
  REQUIRE(runCommand(single("train " + plan + fresh + " --set model.gpt.init_from=gpt2_w16.bin"),
                     &out) == 0);
  CHECK(out.find("initialized from llm.c checkpoint " + dir.file("gpt2_w16.bin")) !=
        std::string::npos);
  CHECK(runCommand(single("train " + plan + fresh + " --set model.gpt.init_from=gpt2_w32.bin"),
                   &out) == 2);
  CHECK(out.find("model.gpt.init_from " + dir.file("gpt2_w32.bin") +
                 ": the file's header has C = 32 but the plan's model.gpt.n_embd = 16") !=
        std::string::npos);

  REQUIRE(runCommand(single("export-checkpoint " + dir.file("ck") + " " +
                            dir.file("m2.safetensors") + " --tag global_step2"),
                     &out) == 0);
  CHECK(out.find("(step 2, 1 rank(s)") != std::string::npos);
}

TEST_CASE("dsrt prepare-data and export-checkpoint refuse bad arguments with exit 2", "[unit]") {
  TempDir dir;
  std::string out;
  CHECK(runCommand(single("prepare-data " + dir.file("absent.txt") + " " + dir.file("x")), &out) ==
        2);
  CHECK(out.find("absent.txt") != std::string::npos);
  CHECK(runCommand(single("prepare-data"), &out) == 2);
  CHECK(out.find("input is required") != std::string::npos);
  CHECK(runCommand(single("export-checkpoint " + dir.file("none") + " " + dir.file("o")), &out) ==
        2);
  CHECK(out.find(dir.file("none")) != std::string::npos);
  CHECK(runCommand(single("export-checkpoint"), &out) == 2);
}

TEST_CASE("dsrt --help-env lists the variables dsrt reads", "[unit]") {
  std::string out;
  REQUIRE(runCommand(dsrt() + " --help-env", &out) == 0);
  INFO(out);
  for (const char* text : {"DS_STORE_BIND_ADDR  (string, default: none)",
                           "DS_CPU_ADAM_ISA  (one of scalar, avx2 or avx512, default: none)",
                           "DS_BF16_LINEAR  (one of auto, native or widen, default: auto)",
                           "DS_GLOO_PIECE_BYTES  (int in [0, 1073741824], default: 393216)",
                           "MASTER_PORT  (int in [1, 65535], default: 29500) (rank contract)",
                           "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "DS_TIMEOUT"}) {
    CHECK(out.find(text) != std::string::npos);
  }
  CHECK(out.find("DS_SSH_CONFIG") == std::string::npos);  // dsrun's
  REQUIRE(runCommand(dsrt() + " --help", &out) == 0);
  CHECK(out.find("dsrt --help-env") != std::string::npos);
}
