// `dsrt generate` (see generate_command.h and docs/inference.md): parses and checks the flags,
// loads the model, runs generate() and prints one line (or JSON object) per prompt.
#include "runtime/cmd/generate_command.h"

#include <CLI/CLI.hpp>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "comm/process_group.h"
#include "core/error.h"
#include "core/rank_env.h"
#include "runtime/cmd/rank_model.h"
#include "runtime/inference/generate.h"
#include "runtime/inference/inference_model.h"
#include "runtime/tensor/thread_policy.h"
#include "runtime/tokenizer/tokenizer.h"

namespace ds::runtime {
namespace {

// "1,2,3" -> ids; ConfigError naming the flag and the bad item.
std::vector<int32_t> parseIds(const std::string& flag, const std::string& text) {
  std::vector<int32_t> ids;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(start, end - start);
    errno = 0;
    char* stop = nullptr;
    const long long v = std::strtoll(item.c_str(), &stop, 10);
    if (item.empty() || *stop != '\0' || errno == ERANGE || v < INT32_MIN || v > INT32_MAX)
      throw ConfigError(fmt::format(
          "{} '{}': '{}' is not a token id (expected comma-separated integers, e.g. 1,2,3)", flag,
          text, item));
    ids.push_back(static_cast<int32_t>(v));
    start = end + 1;
  }
  return ids;
}

struct Flags {
  std::string model, tag, tokenizer, vocab, format, dtype = "fp32", logits;
  std::vector<std::string> promptIds, prompts;
  std::string stop;
  int nHead = 0, vocabSize = 0, threads = 0, localRank = -1;
  GenerateOptions gen;
  bool greedy = false;
};

void addFlags(CLI::App& app, Flags& f) {
  app.add_option("model", f.model,
                 "a checkpoint root written by dsrt train (any ZeRO stage and world size) or an "
                 "llm.c gpt2_*.bin (e.g. from dsrt export-checkpoint --format llmc)")
      ->required();
  app.add_option("--prompt_ids", f.promptIds,
                 "a prompt as comma-separated token ids; repeat for several prompts (batched)")
      ->type_name("IDS")
      ->allow_extra_args(false);
  app.add_option("--prompt", f.prompts,
                 "a text prompt, encoded with --tokenizer; repeat for several prompts")
      ->type_name("TEXT")
      ->allow_extra_args(false);
  app.add_option("--tokenizer", f.tokenizer,
                 "tokenizer for --prompt and text output: byte (id = byte value, as dsrt "
                 "prepare-data writes) or gpt2 (GPT-2's BPE, from --vocab)");
  app.add_option("--vocab", f.vocab,
                 "gpt2's vocabulary: a folder with encoder.json + vocab.bpe (or vocab.json + "
                 "merges.txt, or tokenizer.json), or a tokenizer.json file");
  app.add_option("--max_new_tokens", f.gen.maxNewTokens, "tokens to generate per prompt")
      ->capture_default_str();
  app.add_option("--temperature", f.gen.sampling.temperature, "softmax temperature; 0 = greedy")
      ->capture_default_str();
  app.add_flag("--greedy", f.greedy, "always take the most likely token (= --temperature 0)");
  app.add_option("--top_k", f.gen.sampling.topK, "sample among the k most likely tokens; 0 = all")
      ->capture_default_str();
  app.add_option("--top_p", f.gen.sampling.topP,
                 "sample among the most likely tokens whose probability reaches p, in (0, 1]")
      ->capture_default_str();
  app.add_option("--seed", f.gen.seed, "sampling seed: the same seed gives the same tokens")
      ->capture_default_str();
  app.add_option("--stop", f.stop,
                 "comma-separated token ids; a prompt ends after generating one of them");
  app.add_option("--dtype", f.dtype, "weights: fp32, or bf16 (rounded, half the memory)")
      ->capture_default_str();
  app.add_option("--format", f.format,
                 "output: ids (one line of generated ids per prompt), text (decoded with "
                 "--tokenizer), json (one object per line); default text with --tokenizer, else "
                 "ids");
  app.add_option("--logits", f.logits,
                 "write the logits every generated token was chosen from to this file (raw "
                 "float32, [tokens, vocab] per prompt in order; rank 0); for numerics checks");
  app.add_option("--local_rank", f.localRank,
                 "set by dsrun (the rank comes from the environment; tensor-parallel)");
  app.add_option("--tag", f.tag, "checkpoint tag (default: the one named by <model>/latest)");
  app.add_option("--n_head", f.nHead, "attention heads (default: recorded in the checkpoint)");
  app.add_option("--vocab_size", f.vocabSize,
                 "real vocabulary, <= wte's rows (default: recorded in the checkpoint)");
  app.add_option("--threads", f.threads,
                 "compute threads (default: OMP_NUM_THREADS, else cores / local ranks; "
                 "docs/plan.md train.threads)");
}

// Checks every flag that does not need the model; fills prompts and stop ids.
void checkFlags(Flags& f, std::vector<std::vector<int32_t>>& prompts,
                std::unique_ptr<Tokenizer>& codec) {
  if (f.greedy) f.gen.sampling.temperature = 0.0f;
  validateSampling(f.gen.sampling);
  if (f.gen.maxNewTokens < 0)
    throw ConfigError(fmt::format("--max_new_tokens {}: expected >= 0", f.gen.maxNewTokens));
  if (f.dtype != "fp32" && f.dtype != "bf16")
    throw ConfigError(fmt::format("--dtype {}: expected fp32 or bf16", f.dtype));
  if (f.threads < 0) throw ConfigError(fmt::format("--threads {}: expected >= 1", f.threads));
  if (!f.tokenizer.empty()) {
    codec = makeTokenizer(f.tokenizer, f.vocab);
  } else if (!f.vocab.empty()) {
    throw ConfigError(fmt::format("--vocab {}: needs --tokenizer gpt2", f.vocab));
  }
  if (f.format.empty()) f.format = codec ? "text" : "ids";
  if (f.format != "ids" && f.format != "text" && f.format != "json")
    throw ConfigError(fmt::format("--format {}: expected ids, text or json", f.format));
  if (f.format == "text" && !codec)
    throw ConfigError("--format text needs --tokenizer (e.g. --tokenizer byte)");
  if (!f.prompts.empty() && !codec)
    throw ConfigError("--prompt needs --tokenizer (e.g. --tokenizer byte); or give --prompt_ids");
  if (f.promptIds.empty() && f.prompts.empty())
    throw ConfigError(
        "generate: no prompt: give --prompt_ids 1,2,3 (or --prompt with --tokenizer)");
  for (const auto& s : f.promptIds) prompts.push_back(parseIds("--prompt_ids", s));
  for (const auto& s : f.prompts) prompts.push_back(codec->encode(s));
  if (!f.stop.empty()) f.gen.stop = parseIds("--stop", f.stop);
}

}  // namespace

int generateCommand(int argc, char** argv) {
  CLI::App app{
      "Generate tokens from a trained GPT-2 (checkpoint folder or llm.c .bin) with a KV cache; "
      "see docs/inference.md",
      "generate"};
  Flags f;
  addFlags(app, f);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    throw ConfigError("generate: " + std::string(e.what()));
  }
  std::vector<std::vector<int32_t>> prompts;
  std::unique_ptr<Tokenizer> codec;
  checkFlags(f, prompts, codec);
  const EnvMap env = currentEnv();
  setupThreads(env, f.threads, "--threads");
  // Several ranks (dsrun ... generate): tensor-parallel over all of them (docs/inference.md).
  LoadOptions lo;
  lo.tag = f.tag;
  lo.nHead = f.nHead;
  lo.vocabSize = f.vocabSize;
  lo.dtype = f.dtype == "bf16" ? DType::kBF16 : DType::kF32;
  RankModel loaded = loadRankModel(env, f.model, lo);
  const RankEnv& re = loaded.rank;
  const InferenceModel& model = loaded.model;
  const std::string& source = loaded.source;
  std::unique_ptr<comm::ProcessGroup>& group = loaded.group;
  if (codec && codec->vocabSize() > model.vocab())
    throw ConfigError(
        fmt::format("--tokenizer {}: its {} ids do not fit the model's vocabulary of {} ({})",
                    f.tokenizer, codec->vocabSize(), model.vocab(), source));
  for (int32_t id : f.gen.stop)
    if (id < 0 || id >= model.vocab())
      throw ConfigError(
          fmt::format("--stop: token id {} outside the vocabulary [0, {})", id, model.vocab()));
  f.gen.group = group.get();
  f.gen.keepLogits = !f.logits.empty();
  const auto results = generate(model, prompts, f.gen);
  if (re.rank != 0) return 0;  // every rank has the same tokens; rank 0 prints them
  if (!f.logits.empty()) {
    std::FILE* file = std::fopen(f.logits.c_str(), "wb");
    if (file == nullptr)
      throw ConfigError(fmt::format("--logits {}: cannot open for writing", f.logits));
    bool wrote = true;
    for (const Generation& g : results)
      wrote = wrote &&
              std::fwrite(g.logits.data(), sizeof(float), g.logits.size(), file) == g.logits.size();
    if (std::fclose(file) != 0 || !wrote)
      throw SystemError(fmt::format("--logits {}: write failed", f.logits), errno);
  }
  for (size_t p = 0; p < results.size(); ++p) {
    const Generation& g = results[p];
    if (f.format == "json") {
      nlohmann::ordered_json j = {{"prompt", p + 1}, {"tokens", g.tokens}, {"finish", g.finish}};
      if (codec) j["text"] = codec->decode(g.tokens);
      std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    } else if (f.format == "text") {
      std::printf("%s\n", codec->decode(g.tokens).c_str());
    } else {
      std::string line;
      for (size_t i = 0; i < g.tokens.size(); ++i)
        line += (i ? "," : "") + std::to_string(g.tokens[i]);
      std::printf("%s\n", line.c_str());
    }
  }
  return 0;
}

}  // namespace ds::runtime
