// `dsrt generate` on a GPT trained by `dsrt train` (ZeRO stage 2) for a few steps: its KV-cached
// logits equal the training model's full forward; the CLI is deterministic (greedy, and sampling
// with a seed), the checkpoint folder and its llm.c export give the same tokens, bf16 runs, and
// bad flags exit 2 naming the flag and value.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "ds/config.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/inference/generate.h"
#include "runtime/inference/inference_model.h"
#include "runtime/model/gpt2.h"
#include "runtime/tensor/threads.h"
#include "tests/support/spawn_ranks.h"

using namespace ds::runtime;
using ds::test::runCommand;
using ds::test::TempDir;

namespace {

std::string dsrt() { return ds::test::dsrtCommand(); }

struct NoHooks : ds::zero::BlockHooks {
  void beforeForward(int) override {}
  void afterForward(int) override {}
  void beforeBackward(int) override {}
  void afterBackward(int) override {}
};

// Trains a 2-layer GPT on byte shards for 8 steps at ZeRO `stage` on `ranks` processes (dsrun
// for more than one); the checkpoint is dir/ck.
void train(const TempDir& dir, int stage = 2, int ranks = 1) {
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
    f << "model:\n  gpt: {n_layer: 2, n_head: 4, n_embd: 32, seq_len: 32, vocab_size: 256, "
         "padded_vocab_size: 320}\n"
      << "data: {shards: d/tok_train_*.bin, val: d/tok_val_*.bin}\n"
      << "train: {steps: 8, checkpoint: {dir: ck}}\n"
      << "deepspeed: {train_batch_size: 4, zero_optimization: {stage: " << stage
      << "}, optimizer: {type: "
         "AdamW, params: {lr: 0.01, weight_decay: 0.1}}}\n";
  }
  INFO(out);
  const std::string launch = ranks == 1 ? dsrt()
                                        : std::string(DS_BINARY_DIR) + "/dsrun --num_gpus " +
                                              std::to_string(ranks) + " --master_port " +
                                              std::to_string(ds::test::freePort()) + " ";
  REQUIRE(runCommand("cd " + dir.file("") + " && " + launch + "train plan.yaml", &out) == 0);
}

// Greedy-generates from prompt with the KV cache and returns the largest log-softmax difference
// between each generated token's logits and Gpt2Model's full forward of prompt + tokens.
double kvVsFullForward(const InferenceModel& m, const std::vector<int32_t>& prompt,
                       Generation* result) {
  GenerateOptions o;
  o.maxNewTokens = 20;
  o.sampling.temperature = 0.0f;
  o.keepLogits = true;
  const auto g = generate(m, {prompt}, o)[0];
  REQUIRE(g.tokens.size() == 20);
  std::vector<int32_t> seq = prompt;
  seq.insert(seq.end(), g.tokens.begin(), g.tokens.end() - 1);
  Gpt2Model model(m.config());
  ds::zero::ParamTable table;
  for (size_t i = 0; i < model.params().size(); ++i)
    table.value.push_back(const_cast<float*>(m.f32(static_cast<int>(i))));
  table.grad.assign(model.params().size(), nullptr);
  NoHooks hooks;
  const std::vector<int32_t> targets(seq.size(), -1);
  model.forward(seq.data(), targets.data(), 1, int(seq.size()), table, hooks);
  const float* probs = model.probabilities();
  REQUIRE(probs != nullptr);
  const int V = m.vocab();
  double err = 0.0;
  for (size_t j = 0; j < g.tokens.size(); ++j) {
    const float* lg = g.logits.data() + j * size_t(V);
    const float* pr = probs + (prompt.size() - 1 + j) * size_t(V);
    double mx = lg[0], sum = 0.0;
    for (int v = 1; v < V; ++v) mx = std::max(mx, double(lg[v]));
    for (int v = 0; v < V; ++v) sum += std::exp(double(lg[v]) - mx);
    for (int v = 0; v < V; ++v)
      err = std::max(err, std::fabs(double(lg[v]) - mx - std::log(sum) - std::log(double(pr[v]))));
  }
  if (result) *result = g;
  return err;
}

// dsrt generate on this process's OpenBLAS kernels: dsrt would otherwise restart itself on
// better ones (runtime/tensor/blas_core.h), whose different sums could flip a greedy near-tie
// against the decode this test runs in process.
std::string gen(const std::string& args, int* rc = nullptr) {
  std::string out;
  const int status = runCommand("OPENBLAS_CORETYPE=" + ds::runtime::blasCoreName() + " " + dsrt() +
                                    "generate " + args + " 2>&1",
                                &out);
  // The log lines dsrt writes to stderr (the thread policy's "INFO threads: ...") are not output.
  std::string kept;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("INFO ", 0) != 0) kept += line + "\n";
  out = kept;
  if (rc) *rc = status;
  else {
    INFO("dsrt generate " << args << "\n" << out);
    REQUIRE(status == 0);
  }
  return out;
}

// Output lines that are not log lines (bf16 logs its linear-layer choice).
std::string stdoutLines(const std::string& out) {
  std::string keep, line;
  for (char ch : out + "\n") {
    if (ch != '\n') {
      line += ch;
      continue;
    }
    if (!line.empty() && line.rfind("INFO ", 0) != 0) keep += line + "\n";
    line.clear();
  }
  return keep;
}

}  // namespace

TEST_CASE("dsrt generate: a trained checkpoint's KV-cached logits equal the training forward",
          "[unit]") {
  TempDir dir;
  train(dir);
  const InferenceModel m = loadInferenceModel(dir.file("ck"), {});
  CHECK(m.config().nHead == 4);
  CHECK(m.config().paddedVocab == 320);
  CHECK(m.vocab() == 256);
  const std::vector<int32_t> prompt = {116, 111, 32, 98, 101};  // "to be"
  Generation g;
  const double err = kvVsFullForward(m, prompt, &g);
  INFO("max |log-softmax difference| " << err);
  CHECK(err <= 1e-5);

  // The CLI: greedy twice the same, the llm.c export the same, ids and text agree.
  const std::string ck = dir.file("ck");
  const std::string args =
      " --prompt_ids 116,111,32,98,101 --prompt_ids 116 --greedy "
      "--max_new_tokens 20";
  const std::string a = gen(ck + args);
  CHECK(gen(args + " " + ck) == a);  // the model may follow the repeated --prompt_ids
  CHECK(a == gen(ck + args));
  std::string first;
  for (size_t j = 0; j < g.tokens.size(); ++j)
    first += (j ? "," : "") + std::to_string(g.tokens[j]);
  CHECK(a.rfind(first + "\n", 0) == 0);
  std::string out;
  REQUIRE(
      runCommand(dsrt() + "export-checkpoint " + ck + " " + dir.file("m.bin") + " --format llmc",
                 &out) == 0);
  CHECK(gen(dir.file("m.bin") + args) == a);
  const std::string text = gen(ck +
                               " --prompt 'to be' --tokenizer byte --greedy "
                               "--max_new_tokens 20 --format json");
  CHECK(text.find("\"tokens\":[" + first + "]") != std::string::npos);

  // Seeded sampling reproduces; another seed differs.
  const std::string s = " --prompt_ids 116,111 --temperature 1.2 --top_p 0.95 --max_new_tokens 24";
  CHECK(gen(ck + s + " --seed 5") == gen(ck + s + " --seed 5"));
  CHECK(gen(ck + s + " --seed 5") != gen(ck + s + " --seed 6"));

  // bf16 weights: 20 tokens per prompt.
  const std::string b = stdoutLines(gen(ck + args + " --dtype bf16"));
  CHECK(std::count(b.begin(), b.end(), '\n') == 2);
  CHECK(std::count(b.begin(), b.end(), ',') == 38);

  // Bad input: exit 2 naming the flag and value.
  struct Bad {
    std::string args, msg;
  };
  const std::vector<Bad> bad = {
      {ck + " --prompt_ids 1,2 --temperature -1", "--temperature -1"},
      {ck + " --prompt_ids 1,2 --top_p 0", "--top_p 0: expected a value in (0, 1]"},
      {ck + " --prompt_ids 1,2 --top_p 1.5", "--top_p 1.5"},
      {ck + " --prompt_ids 1,2 --top_k -3", "--top_k -3"},
      {ck + " --prompt_ids 1,256",
       "--prompt_ids #1: token id 256 (position 1) outside the "
       "vocabulary [0, 256)"},
      {ck + " --prompt_ids 1,,2", "--prompt_ids '1,,2': '' is not a token id"},
      {dir.file("missing") + " --prompt_ids 1",
       "model '" + dir.file("missing") + "' does not exist"},
      {ck + " --prompt_ids 1 --stop 300", "--stop: token id 300 outside the vocabulary"},
      {ck + " --prompt_ids 1 --dtype fp16", "--dtype fp16: expected fp32 or bf16"},
      {ck + " --prompt hi", "--prompt needs --tokenizer"},
      {ck + " --prompt_ids 1 --max_new_tokens -1", "--max_new_tokens -1"},
      {ck, "no prompt"},
  };
  std::string longPrompt = "1";
  for (int i = 0; i < 32; ++i) longPrompt += ",1";
  for (const Bad& c : bad) {
    int rc = 0;
    const std::string o2 = gen(c.args, &rc);
    INFO(c.args << "\n" << o2);
    CHECK(rc == 2);
    CHECK(o2.find(c.msg) != std::string::npos);
  }
  int rc = 0;
  const std::string o3 = gen(ck + " --prompt_ids " + longPrompt, &rc);
  CHECK(rc == 2);
  CHECK(o3.find("--prompt_ids #1: 33 tokens, longer than the model's context of 32 tokens") !=
        std::string::npos);
  const std::string help = gen("--help");
  for (const char* flag : {"--prompt_ids", "--max_new_tokens", "--temperature", "--top_k",
                           "--top_p", "--seed", "--stop", "--dtype", "--greedy", "--tokenizer"})
    CHECK(help.find(flag) != std::string::npos);
}

TEST_CASE("dsrt generate: a ZeRO-3 checkpoint of 2 ranks loads whole and matches the forward",
          "[multiproc]") {
  TempDir dir;
  train(dir, 3, 2);
  {
    const auto reader = CheckpointReader::open(dir.file("ck"));
    REQUIRE(reader->info().worldSize == 2);
    REQUIRE(reader->info().zeroStage == 3);
  }
  const InferenceModel m = loadInferenceModel(dir.file("ck"), {});
  const double err = kvVsFullForward(m, {116, 111, 32, 98, 101}, nullptr);
  INFO("max |log-softmax difference| " << err);
  CHECK(err <= 1e-5);
  std::string out;
  REQUIRE(runCommand(dsrt() + "export-checkpoint " + dir.file("ck") + " " + dir.file("m.bin") +
                         " --format llmc",
                     &out) == 0);
  const std::string args = " --prompt_ids 116,111,32 --greedy --max_new_tokens 16";
  CHECK(gen(dir.file("ck") + args) == gen(dir.file("m.bin") + args));
}

namespace {

std::vector<float> readFloats(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::vector<float> v;
  float x = 0.0f;
  while (f.read(reinterpret_cast<char*>(&x), sizeof x)) v.push_back(x);
  return v;
}

// dsrun --num_gpus ranks ... dsrt generate args (rank 0's output, INFO lines dropped).
std::string genRanks(int ranks, const std::string& args) {
  std::string out;
  const int status =
      runCommand("OPENBLAS_CORETYPE=" + ds::runtime::blasCoreName() + " " +
                     std::string(DS_BINARY_DIR) + "/dsrun --num_gpus " + std::to_string(ranks) +
                     " --master_port " + std::to_string(ds::test::freePort()) + " " +
                     DS_BINARY_DIR + "/dsrt generate " + args + " 2>&1",
                 &out);
  INFO("dsrun generate " << args << "\n" << out);
  REQUIRE(status == 0);
  std::string kept;  // rank 0's lines, without dsrun's "[0] " prefix
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("[0] ", 0) == 0 && line.rfind("[0] INFO ", 0) != 0)
      kept += line.substr(4) + "\n";
  return kept;
}

}  // namespace

TEST_CASE("dsrt generate: 2 tensor-parallel ranks give 1 rank's tokens and logits", "[multiproc]") {
  TempDir dir;
  train(dir, 3, 2);  // ZeRO-3 over 2 ranks: each TP rank slices its shard of the whole model
  const std::string ck = dir.file("ck");
  for (const std::string dtype : {"fp32", "bf16"}) {
    const std::string args =
        " --prompt_ids 116,111,32,98,101 --prompt_ids 116 --greedy "
        "--max_new_tokens 20 --dtype " +
        dtype;
    const std::string one = stdoutLines(gen(ck + args + " --logits " + dir.file("l1." + dtype)));
    const std::string two = genRanks(2, ck + args + " --logits " + dir.file("l2." + dtype));
    INFO(dtype);
    CHECK(one == two);
    CHECK(std::count(two.begin(), two.end(), ',') == 38);
    const auto l1 = readFloats(dir.file("l1." + dtype)), l2 = readFloats(dir.file("l2." + dtype));
    REQUIRE(l1.size() == 40u * 256u);
    REQUIRE(l1.size() == l2.size());
    double err = 0.0;
    for (size_t i = 0; i < l1.size(); ++i)
      err = std::max(
          err, std::fabs(double(l1[i]) - double(l2[i])) / std::max(1.0, std::fabs(double(l1[i]))));
    INFO("max relative logit difference, 1 rank vs 2 tensor-parallel ranks: " << err);
    CHECK(err <= 1e-5);
  }
  // A vocabulary that does not divide by the ranks (GPT-2's 50257 over 2): 255 ids split in
  // blocks of 128, the second reaching one row of wte's padding, whose logit is dropped.
  const std::string odd =
      " --prompt_ids 116,111,32,98 --greedy --max_new_tokens 12 --vocab_size 255";
  const std::string one = stdoutLines(gen(ck + odd + " --logits " + dir.file("o1")));
  const std::string two = genRanks(2, ck + odd + " --logits " + dir.file("o2"));
  CHECK(one == two);
  const auto l1 = readFloats(dir.file("o1")), l2 = readFloats(dir.file("o2"));
  REQUIRE(l1.size() == 12u * 255u);
  REQUIRE(l2.size() == l1.size());
  for (size_t i = 0; i < l1.size(); ++i)
    REQUIRE(std::fabs(double(l1[i]) - double(l2[i])) <=
            1e-5 * std::max(1.0, std::fabs(double(l1[i]))));
}

TEST_CASE("generate: tensor-parallel refuses shapes that do not split over the ranks", "[unit]") {
  ModelConfig cfg;
  cfg.kind = "gpt2";
  cfg.nLayer = 1;
  cfg.nHead = 4;
  cfg.nEmbd = 8;
  cfg.seqLen = 4;
  cfg.vocabSize = 6;
  cfg.paddedVocab = 8;
  size_t numel = 0;
  for (const auto& param : makeModel(cfg)->params()) numel += param.numel;
  auto build = [&](int ranks) {
    return InferenceModel(cfg, std::vector<float>(numel, 0.5f), ds::DType::kF32, TpShard{0, ranks});
  };
  CHECK_THROWS_WITH(build(3), Catch::Contains("n_head (4) divisible by 3"));
  // vocab_size 6 over 4 ranks: blocks of 2 rows, the last one wte's padding rows 6 and 7.
  CHECK(build(4).localVocab() == 2);
  cfg.paddedVocab = 6;
  numel -= 2 * 8;
  CHECK_THROWS_WITH(build(4), Catch::Contains("4 blocks of 2 rows (vocab_size 6 rounded up), "
                                              "more than its 6 rows (padded_vocab_size)"));
  cfg.paddedVocab = 8;
  numel += 2 * 8;
  cfg.vocabSize = 8;
  const InferenceModel half = build(2);
  CHECK(half.localEmbd() == 4);
  CHECK(half.localVocab() == 4);
  CHECK(half.weightBytes() <
        InferenceModel(cfg, std::vector<float>(numel, 0.5f), ds::DType::kF32).weightBytes());
}
