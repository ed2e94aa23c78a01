// `dsrt export-checkpoint --format hf` and `--format llmc` end to end: a GPT-2 trained by dsrt on
// byte shards is exported as a Hugging Face folder, and an independent GPT-2 forward in NumPy
// (tests/runtime/cmd/hf_gpt2_forward.py, reading the safetensors by hand) over the HF-named
// weights reproduces dsrt's own eval loss on the same validation tokens; where transformers is
// installed, GPT2LMHeadModel.from_pretrained on the folder does too. The llm.c export starts a
// run through model.gpt.init_from whose eval loss is dsrt's, bit for bit.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "ds/config.h"
#include "tests/support/skip.h"
#include "tests/support/spawn_ranks.h"

using ds::test::runCommand;
using ds::test::TempDir;

namespace {

std::string dsrt() { return ds::test::dsrtCommand(); }
std::string script() {
  return std::string(DS_SOURCE_DIR) + "/tests/runtime/cmd/hf_gpt2_forward.py";
}

// The first python3 that imports `modules` ("" when none): PATH's, then Debian's (a pyenv or venv
// python3 ahead in PATH may lack Debian's python3-numpy).
std::string pythonWith(const std::string& modules) {
  for (std::string python : {"python3", "/usr/bin/python3"})
    if (runCommand(python + " -c 'import " + modules + "' 2>/dev/null", nullptr) == 0)
      return python;
  return "";
}

constexpr int kSeqLen = 16, kMicro = 4, kEvalSteps = 3;

// Prepares shards, trains 6 steps (padded vocabulary 320 > 256, so the export must cut wte's
// rows) and returns the final eval loss from the run summary.
double trainAndEval(const TempDir& dir) {
  {
    std::ofstream f(dir.file("text.txt"), std::ios::binary);
    for (int i = 0; i < 300; ++i)
      f << "to be or not to be, " << i % 11 << " that is the question\n";
  }
  std::string out;
  REQUIRE(runCommand(dsrt() + "prepare-data " + dir.file("text.txt") + " " + dir.file("d/tok") +
                         " --val_fraction 0.2",
                     &out) == 0);
  {
    std::ofstream f(dir.file("plan.yaml"));
    f << "model:\n  gpt: {n_layer: 2, n_head: 4, n_embd: 32, seq_len: " << kSeqLen
      << ", vocab_size: 256, padded_vocab_size: 320}\n"
      << "data: {shards: d/tok_train_*.bin, val: d/tok_val_*.bin}\n"
      << "train: {steps: 6, eval_steps: " << kEvalSteps << ", checkpoint: {dir: ck}}\n"
      << "deepspeed: {train_batch_size: " << kMicro
      << ", optimizer: {type: AdamW, params: {lr: 0.01, weight_decay: 0.1}}}\n";
  }
  REQUIRE(runCommand(dsrt() + "train " + dir.file("plan.yaml") + " --summary " + dir.file("s.json"),
                     &out) == 0);
  auto summary = nlohmann::json::parse(ds::test::readFile(dir.file("s.json")));
  REQUIRE(summary["evals"].size() == 1);
  return summary["evals"][0]["val_loss"].get<double>();
}

double pythonLoss(const std::string& python, const TempDir& dir, const std::string& extra) {
  std::string out;
  const std::string cmd = python + " " + script() + " " + dir.file("hf") + " " +
                          dir.file("d/tok_val_000000.bin") + " " + std::to_string(kSeqLen) + " " +
                          std::to_string(kMicro * kEvalSteps) + extra;
  INFO(cmd);
  REQUIRE(runCommand(cmd, &out) == 0);
  INFO(out);
  const auto pos = out.rfind("loss ");
  REQUIRE(pos != std::string::npos);
  return std::stod(out.substr(pos + 5));
}

}  // namespace

TEST_CASE("export-checkpoint --format hf: a NumPy GPT-2 over the HF names gives dsrt's eval loss",
          "[unit]") {
  const std::string python = pythonWith("numpy");
  if (python.empty()) DS_SKIP("python3 with numpy not found (apt-get install python3-numpy)");
  TempDir dir;
  const double ours = trainAndEval(dir);
  std::string out;
  REQUIRE(runCommand(dsrt() + "export-checkpoint " + dir.file("ck") + " " + dir.file("hf") +
                         " --format hf",
                     &out) == 0);
  CHECK(out.find("wrote " + dir.file("hf") + " (hf): ") != std::string::npos);
  auto cfg = nlohmann::json::parse(ds::test::readFile(dir.file("hf/config.json")));
  CHECK(cfg["architectures"] == nlohmann::json::array({"GPT2LMHeadModel"}));
  CHECK(cfg["vocab_size"] == 256);
  CHECK(cfg["n_positions"] == kSeqLen);
  CHECK(cfg["n_head"] == 4);
  CHECK(cfg["n_layer"] == 2);
  const std::string st = ds::test::readFile(dir.file("hf/model.safetensors"));
  REQUIRE(st.size() > 8);
  uint64_t len = 0;
  std::memcpy(&len, st.data(), 8);
  auto header = nlohmann::json::parse(st.substr(8, len));
  CHECK(header["transformer.wte.weight"]["shape"] == nlohmann::json::array({256, 32}));
  CHECK(header["transformer.h.1.attn.c_attn.weight"]["shape"] == nlohmann::json::array({32, 96}));
  CHECK(header["transformer.h.0.mlp.c_proj.weight"]["shape"] == nlohmann::json::array({128, 32}));
  CHECK(header["__metadata__"]["format"] == "pt");

  // fp32 forward (ours) against float64 (NumPy): a few fp32 roundings per op over 2 layers
  // (measured 4.1e-9 relative). A wrong layout, name or epsilon moves it far more.
  const double numpy = pythonLoss(python, dir, "");
  std::printf("eval loss: dsrt %.9f, NumPy over the HF export %.9f (rel %.3g)\n", ours, numpy,
              std::fabs(ours - numpy) / numpy);
  CHECK(std::fabs(ours - numpy) <= 1e-6 * numpy);
  CHECK(ours > 1.0);  // a real loss, not a trivially matching zero

  // The llm.c export starts a fresh run (0 steps: just the final eval) with the same loss.
  REQUIRE(runCommand(dsrt() + "export-checkpoint " + dir.file("ck") + " " + dir.file("m.bin") +
                         " --format llmc",
                     &out) == 0);
  REQUIRE(runCommand(dsrt() + "train " + dir.file("plan.yaml") +
                         " --set train.steps=0 --set train.checkpoint.dir=ck0 --set "
                         "model.gpt.init_from=m.bin --summary " +
                         dir.file("s0.json"),
                     &out) == 0);
  auto again = nlohmann::json::parse(ds::test::readFile(dir.file("s0.json")));
  REQUIRE(again["evals"].size() == 1);
  CHECK(again["evals"][0]["val_loss"].get<double>() == ours);
}

TEST_CASE("export-checkpoint --format hf: transformers loads it as GPT2LMHeadModel",
          "[unit][optional]") {
  const std::string python = pythonWith("transformers, torch");
  if (python.empty())
    DS_SKIP("python3 transformers (and torch) not installed; Debian 12 has no transformers");
  TempDir dir;
  const double ours = trainAndEval(dir);
  std::string out;
  REQUIRE(runCommand(dsrt() + "export-checkpoint " + dir.file("ck") + " " + dir.file("hf") +
                         " --format hf",
                     &out) == 0);
  const double theirs = pythonLoss(python, dir, " --transformers");
  std::printf("eval loss: dsrt %.9f, transformers %.9f\n", ours, theirs);
  CHECK(std::fabs(ours - theirs) <= 1e-5 * theirs);
}

TEST_CASE("export-checkpoint --format hf/llmc refuses a non-GPT checkpoint", "[unit]") {
  TempDir dir;
  std::string out;
  REQUIRE(runCommand(dsrt() + "train --set 'model={mlp: {sizes: [64, 32, 64]}}' --set " +
                         "train.steps=1 --set train.checkpoint.dir=" + dir.file("ck"),
                     &out) == 0);
  for (std::string format : {"hf", "llmc"}) {
    CHECK(runCommand(dsrt() + "export-checkpoint " + dir.file("ck") + " " + dir.file("o") +
                         " --format " + format,
                     &out) == 2);
    CHECK(out.find("not a GPT-2 model") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(dir.file("o")));
  }
  CHECK(runCommand(
            dsrt() + "export-checkpoint " + dir.file("ck") + " " + dir.file("o") + " --format onnx",
            &out) == 2);
  CHECK(out.find("onnx") != std::string::npos);
}
