// A tensor-parallel rank loads only its shard (runtime/inference/tensor_parallel.h,
// loadInferenceModel): from an llm.c file it reads exactly its slices' values, holds 1/T of the
// split matrices plus the replicated tensors (the bytes counted, fp32 and bf16), and every held
// parameter equals the same slice cut from the whole model.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/inference/inference_model.h"
#include "runtime/inference/tensor_parallel.h"
#include "runtime/model/model.h"
#include "tests/support/spawn_ranks.h"

using namespace ds::runtime;
using ds::test::TempDir;

namespace {

ModelConfig smallGpt() {
  ModelConfig cfg;
  cfg.kind = "gpt2";
  cfg.nLayer = 2;
  cfg.nHead = 4;
  cfg.nEmbd = 16;
  cfg.seqLen = 8;
  cfg.vocabSize = 40;
  cfg.paddedVocab = 48;
  return cfg;
}

// An llm.c gpt2 .bin (version 3, fp32) of cfg whose value i is a function of i.
std::vector<float> writeLlmc(const std::string& path, const ModelConfig& cfg) {
  std::vector<int32_t> header(256, 0);
  header[0] = 20240326;
  header[1] = 3;
  header[2] = cfg.seqLen;
  header[3] = cfg.vocabSize;
  header[4] = cfg.nLayer;
  header[5] = cfg.nHead;
  header[6] = cfg.nEmbd;
  header[7] = cfg.paddedVocab;
  std::vector<float> flat(flatSize(cfg));
  for (size_t i = 0; i < flat.size(); ++i)
    flat[i] = static_cast<float>(static_cast<int>(i % 251) - 125) / 64.0f;
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(header.data()), 1024);
  out.write(reinterpret_cast<const char*>(flat.data()),
            static_cast<std::streamsize>(flat.size() * sizeof(float)));
  return flat;
}

}  // namespace

TEST_CASE("tensor-parallel load: a rank reads and holds only its shard", "[unit]") {
  TempDir dir;
  const ModelConfig cfg = smallGpt();
  const std::string path = dir.file("model.bin");
  const std::vector<float> whole = writeLlmc(path, cfg);
  REQUIRE(whole.size() == flatSize(cfg));
  const size_t C = 16, L = 2, V = 40, Vp = 48, maxT = 8;
  // Split 1/T: wte's real rows, qkv, attproj, fc, fcproj (weights and the qkv/fc biases).
  const size_t split = V * C + L * (3 * C * C + 3 * C + C * C + 4 * C * C + 4 * C + 4 * C * C);
  // Replicated: wpe; per layer ln1 w/b, attproj bias, ln2 w/b, fcproj bias; ln_f w/b.
  const size_t replicated = maxT * C + L * 6 * C + 2 * C;
  REQUIRE(split + replicated + (Vp - V) * C == whole.size());
  for (const auto dtype : {ds::DType::kF32, ds::DType::kBF16}) {
    for (int ranks : {1, 2, 4}) {
      for (int rank = 0; rank < ranks; ++rank) {
        INFO((dtype == ds::DType::kF32 ? "fp32" : "bf16") << ", rank " << rank << " of " << ranks);
        LoadOptions opts;
        opts.dtype = dtype;
        opts.shard = TpShard{rank, ranks};
        size_t read = 0;
        const InferenceModel model = loadInferenceModel(path, opts, nullptr, &read);
        const size_t held = ranks == 1 ? whole.size() : split / size_t(ranks) + replicated;
        CHECK(read == held);
        // fp32: every value once; bf16: every value as bf16 plus fp32 copies of the vectors and
        // wpe (the replicated tensors and this rank's qkv and fc bias slices), which the kernels
        // read as fp32.
        const size_t vectors = replicated + L * (3 * C + 4 * C) / size_t(ranks);
        const size_t bytes = dtype == ds::DType::kF32 ? held * 4 : held * 2 + vectors * 4;
        CHECK(model.heldBytes() == bytes);
        // The same parameters as the whole model cut in memory.
        const InferenceModel cut(cfg, whole, dtype, opts.shard);
        REQUIRE(cut.heldBytes() == bytes);
        std::vector<size_t> sizes;
        shardRanges(cfg, opts.shard, sizes);
        for (size_t i = 0; i < sizes.size(); ++i) {
          const int param = static_cast<int>(i);
          if (model.f32(param) != nullptr) {
            REQUIRE(cut.f32(param) != nullptr);
            CHECK(std::memcmp(model.f32(param), cut.f32(param), sizes[i] * 4) == 0);
          }
          if (dtype == ds::DType::kBF16)
            CHECK(std::memcmp(model.b16(param), cut.b16(param), sizes[i] * 2) == 0);
        }
      }
    }
  }
}

TEST_CASE("tensor-parallel load: rank 1 of 2 holds the second half of each split matrix",
          "[unit]") {
  const ModelConfig cfg = smallGpt();
  std::vector<float> whole(flatSize(cfg));
  for (size_t i = 0; i < whole.size(); ++i) whole[i] = static_cast<float>(i);
  const InferenceModel model(cfg, whole, ds::DType::kF32, TpShard{1, 2});
  const size_t C = 16;
  // wte: rows 20..39 of 48.
  CHECK(model.f32(0)[0] == static_cast<float>(20 * C));
  // Layer 0's qkvw: rows 8..15 of q, then of k (whole offset: wte + wpe + ln1w + ln1b).
  const size_t qkv = 48 * C + 8 * C + 2 * (2 * C);
  const float* q = model.f32(model.layerParam(2, 0));
  CHECK(q[0] == static_cast<float>(qkv + 8 * C));
  CHECK(q[8 * C] == static_cast<float>(qkv + C * C + 8 * C));
  // Layer 0's attprojw: columns 8..15 of each row.
  const size_t attproj = qkv + 2 * (3 * C * C) + 2 * (3 * C);
  const float* proj = model.f32(model.layerParam(4, 0));
  CHECK(proj[0] == static_cast<float>(attproj + 8));
  CHECK(proj[8] == static_cast<float>(attproj + C + 8));
}
