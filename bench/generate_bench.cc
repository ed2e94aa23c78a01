// bench_generate_bench: decode tokens/s of dsrt generate's KV-cached decoder (runtime/inference)
// on a randomly initialised GPT-2 (default: 124M shapes), at each batch size given: every
// sequence is prefilled with --prompt tokens, then --steps batched decode steps are timed
// (tokens/s = batch * steps / seconds; the best of --reps). Also prints the weight bytes read per
// step and the implied GB/s. Not a correctness check (tests/runtime/inference does that).
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "runtime/data/rng.h"
#include "runtime/inference/decoder.h"
#include "runtime/inference/inference_model.h"
#include "runtime/tensor/threads.h"

using namespace ds::runtime;

int main(int argc, char** argv) {
  CLI::App app{"KV-cached decode tokens/s of dsrt generate's decoder"};
  ModelConfig cfg;
  cfg.nLayer = 12;
  cfg.nHead = 12;
  cfg.nEmbd = 768;
  cfg.seqLen = 1024;
  cfg.vocabSize = 50257;
  cfg.paddedVocab = 50304;
  std::vector<int> batches = {1, 16};
  int prompt = 64, steps = 16, reps = 2, threads = 0;
  std::string dtype = "fp32";
  app.add_option("--n_layer", cfg.nLayer)->capture_default_str();
  app.add_option("--n_head", cfg.nHead)->capture_default_str();
  app.add_option("--n_embd", cfg.nEmbd)->capture_default_str();
  app.add_option("--seq_len", cfg.seqLen)->capture_default_str();
  app.add_option("--vocab_size", cfg.vocabSize)->capture_default_str();
  app.add_option("--padded_vocab", cfg.paddedVocab)->capture_default_str();
  app.add_option("--batch", batches, "batch sizes to time")->capture_default_str();
  app.add_option("--prompt", prompt, "prompt tokens per sequence")->capture_default_str();
  app.add_option("--steps", steps, "decode steps timed")->capture_default_str();
  app.add_option("--reps", reps, "repetitions (best is printed)")->capture_default_str();
  app.add_option("--dtype", dtype, "fp32 or bf16")->capture_default_str();
  app.add_option("--threads", threads, "compute threads (default OpenMP's)");
  CLI11_PARSE(app, argc, argv);
  if (threads > 0) setComputeThreads(threads);
  if (prompt + steps > cfg.seqLen) {
    std::fprintf(stderr, "--prompt %d + --steps %d exceed --seq_len %d\n", prompt, steps,
                 cfg.seqLen);
    return 2;
  }
  const ds::DType dt = dtype == "bf16" ? ds::DType::kBF16 : ds::DType::kF32;
  auto model = makeModel(cfg);
  std::vector<float> flat(model->numParamsTotal());
  model->initParams(flat.data(), 1);
  const InferenceModel m(cfg, std::move(flat), dt);
  std::printf("model: %d layers, n_embd %d, %d heads, vocab %d, %s weights %.1f MB; threads %d\n",
              cfg.nLayer, cfg.nEmbd, cfg.nHead, cfg.vocabSize, dtype.c_str(),
              double(m.weightBytes()) / 1e6, computeThreads());
  SplitMix64 rng(3);
  for (int B : batches) {
    double best = 1e30;
    for (int r = 0; r < reps; ++r) {
      Decoder dec(m, B);
      std::vector<float> logits(size_t(B) * size_t(cfg.vocabSize));
      std::vector<int32_t> toks(static_cast<size_t>(prompt));
      for (int b = 0; b < B; ++b) {
        for (auto& t : toks) t = int32_t(rng.below(uint64_t(cfg.vocabSize)));
        const std::vector<int> slots(size_t(prompt), b);
        std::vector<bool> rows(size_t(prompt), false);
        rows.back() = true;
        dec.forward(slots.data(), toks.data(), prompt, rows, logits.data());
      }
      std::vector<int> slots(static_cast<size_t>(B));
      std::vector<int32_t> next(static_cast<size_t>(B));
      for (int b = 0; b < B; ++b) slots[size_t(b)] = b;
      const auto t0 = std::chrono::steady_clock::now();
      for (int s = 0; s < steps; ++s) {
        for (auto& t : next) t = int32_t(rng.below(uint64_t(cfg.vocabSize)));
        dec.forward(slots.data(), next.data(), B, {}, logits.data());
      }
      const double sec =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (sec < best) best = sec;
    }
    const double stepSec = best / steps;
    std::printf("batch %3d: %8.1f tokens/s  (%.2f ms/step, weights %.1f GB/s)\n", B,
                B * steps / best, stepSec * 1e3, double(m.weightBytes()) / stepSec / 1e9);
  }
  return 0;
}
