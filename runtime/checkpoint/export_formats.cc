// exportHuggingFace and exportLlmc (see export_formats.h).
#include "runtime/checkpoint/export_formats.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/durable_file.h"
#include "runtime/checkpoint/safetensors.h"

namespace ds::runtime {
namespace {

// Gpt2Model's per-layer parameter kinds in order (runtime/model/gpt2.cc), with transformers'
// names and whether the tensor is a linear weight (stored transposed, [in, out], by Conv1D).
struct LayerKind {
  const char* ours;
  const char* hf;
  bool linear;
};
constexpr LayerKind kLayerKinds[] = {
    {"ln1w", "ln_1.weight", false},           {"ln1b", "ln_1.bias", false},
    {"qkvw", "attn.c_attn.weight", true},     {"qkvb", "attn.c_attn.bias", false},
    {"attprojw", "attn.c_proj.weight", true}, {"attprojb", "attn.c_proj.bias", false},
    {"ln2w", "ln_2.weight", false},           {"ln2b", "ln_2.bias", false},
    {"fcw", "mlp.c_fc.weight", true},         {"fcb", "mlp.c_fc.bias", false},
    {"fcprojw", "mlp.c_proj.weight", true},   {"fcprojb", "mlp.c_proj.bias", false}};
constexpr size_t kKinds = sizeof(kLayerKinds) / sizeof(kLayerKinds[0]);

// The consolidated fp32 parameters of a GPT-2 checkpoint and its shape.
struct GptCheckpoint {
  CheckpointInfo info;
  std::vector<float> flat;
  std::vector<size_t> offsets;  // per parameter, into flat
  int nLayer = 0, nEmbd = 0, maxT = 0, paddedVocab = 0, vocab = 0, nHead = 0;
};

int recordedInt(const CheckpointInfo& info, const std::string& key) {
  auto state = nlohmann::json::parse(info.clientState, nullptr, false);
  if (state.is_discarded() || !state.contains("plan_identity")) return 0;
  const auto& ident = state["plan_identity"];
  if (!ident.contains(key) || !ident[key].is_string()) return 0;
  try {
    return std::stoi(ident[key].get<std::string>());
  } catch (const std::exception&) {
    return 0;
  }
}

void checkGptNames(const CheckpointInfo& info, int layers) {
  std::vector<std::string> want{"wte", "wpe"};
  for (const auto& kind : kLayerKinds)
    for (int layer = 0; layer < layers; ++layer)
      want.push_back(fmt::format("h.{}.{}", layer, kind.ours));
  want.emplace_back("lnfw");
  want.emplace_back("lnfb");
  for (size_t i = 0; i < want.size(); ++i)
    if (i >= info.params.size() || info.params[i].name != want[i])
      throw ConfigError(fmt::format(
          "checkpoint {}: not a GPT-2 model (parameter {} is '{}', expected '{}'); only "
          "model.gpt checkpoints export as hf or llmc",
          info.dir, i, i < info.params.size() ? info.params[i].name : "(none)", want[i]));
}

// The checkpoint's facts and offsets (flat left empty) and its reader.
GptCheckpoint openGpt(const std::string& root, const std::string& tag, ExportShape shape,
                      std::unique_ptr<CheckpointReader>& reader) {
  reader = CheckpointReader::open(root, tag);
  GptCheckpoint ck;
  ck.info = reader->info();
  const auto& params = ck.info.params;
  if (params.size() < 4 || (params.size() - 4) % kKinds != 0 || params[0].shape.size() != 2 ||
      params[1].shape.size() != 2)
    throw ConfigError(
        fmt::format("checkpoint {}: not a GPT-2 model ({} parameters, first '{}'); "
                    "only model.gpt checkpoints export as hf or llmc",
                    ck.info.dir, params.size(), params.empty() ? "" : params[0].name));
  ck.nLayer = int((params.size() - 4) / kKinds);
  checkGptNames(ck.info, ck.nLayer);
  ck.paddedVocab = int(params[0].shape[0]);
  ck.nEmbd = int(params[0].shape[1]);
  ck.maxT = int(params[1].shape[0]);
  ck.nHead = shape.nHead ? shape.nHead : recordedInt(ck.info, "model.gpt.n_head");
  ck.vocab = shape.vocabSize ? shape.vocabSize : recordedInt(ck.info, "model.gpt.vocab_size");
  if (ck.nHead <= 0 || ck.nEmbd % ck.nHead != 0)
    throw ConfigError(fmt::format(
        "checkpoint {}: n_head {} (the checkpoint records {}): give --n_head, a divisor of "
        "n_embd {}",
        ck.info.dir, ck.nHead, recordedInt(ck.info, "model.gpt.n_head"), ck.nEmbd));
  if (ck.vocab <= 0 || ck.vocab > ck.paddedVocab)
    throw ConfigError(fmt::format(
        "checkpoint {}: vocab_size {} (the checkpoint records {}): give --vocab_size, at most "
        "the {} rows of wte",
        ck.info.dir, ck.vocab, recordedInt(ck.info, "model.gpt.vocab_size"), ck.paddedVocab));
  size_t total = 0;
  for (const auto& param : params) {
    ck.offsets.push_back(total);
    total += param.numel;
  }
  return ck;
}

GptCheckpoint loadGpt(const std::string& root, const std::string& tag, ExportShape shape) {
  std::unique_ptr<CheckpointReader> reader;
  GptCheckpoint ck = openGpt(root, tag, shape, reader);
  const auto& params = ck.info.params;
  const size_t total = ck.offsets.back() + params.back().numel;
  ck.flat.resize(total);
  const auto names = reader->stateNames();
  if (std::find(names.begin(), names.end(), "fp32") != names.end())
    reader->readRange(0, total, "fp32", ck.flat.data());
  else reader->readModel(params, ck.flat.data());
  return ck;
}

// [rows, cols] row-major -> [cols, rows].
std::vector<float> transposed(const float* src, int64_t rows, int64_t cols) {
  std::vector<float> out(size_t(rows * cols));
  for (int64_t row = 0; row < rows; ++row)
    for (int64_t col = 0; col < cols; ++col) out[size_t(col * rows + row)] = src[row * cols + col];
  return out;
}

std::string hfConfigJson(const GptCheckpoint& ck) {
  nlohmann::ordered_json cfg = {
      {"architectures", {"GPT2LMHeadModel"}},
      {"model_type", "gpt2"},
      {"vocab_size", ck.vocab},
      {"n_positions", ck.maxT},
      {"n_ctx", ck.maxT},
      {"n_embd", ck.nEmbd},
      {"n_layer", ck.nLayer},
      {"n_head", ck.nHead},
      {"n_inner", nullptr},
      {"activation_function", "gelu_new"},
      {"layer_norm_epsilon", 1e-5},
      {"initializer_range", 0.02},
      {"resid_pdrop", 0.0},
      {"embd_pdrop", 0.0},
      {"attn_pdrop", 0.0},
      {"scale_attn_weights", true},
      {"scale_attn_by_inverse_layer_idx", false},
      {"reorder_and_upcast_attn", false},
      {"tie_word_embeddings", true},
      {"use_cache", true},
      {"torch_dtype", "float32"},
  };
  return cfg.dump(2) + "\n";
}

}  // namespace

void exportHuggingFace(const std::string& root, const std::string& tag, const std::string& outDir,
                       ExportShape shape) {
  const GptCheckpoint ck = loadGpt(root, tag, shape);
  const auto& params = ck.info.params;
  std::vector<std::vector<float>> owned;  // transposed weights
  owned.reserve(params.size());
  std::vector<ckpt::StTensor> tensors;
  const int64_t embd = ck.nEmbd;
  tensors.push_back({"transformer.wte.weight", DType::kF32, {ck.vocab, embd}, ck.flat.data()});
  tensors.push_back(
      {"transformer.wpe.weight", DType::kF32, params[1].shape, ck.flat.data() + ck.offsets[1]});
  for (int layer = 0; layer < ck.nLayer; ++layer)
    for (size_t kind = 0; kind < kKinds; ++kind) {
      const size_t index = 2 + kind * size_t(ck.nLayer) + size_t(layer);
      const auto& param = params[index];
      const float* data = ck.flat.data() + ck.offsets[index];
      std::string name = fmt::format("transformer.h.{}.{}", layer, kLayerKinds[kind].hf);
      if (kLayerKinds[kind].linear) {  // ours [out, in] (y = x W^T), Conv1D's [in, out]
        owned.push_back(transposed(data, param.shape[0], param.shape[1]));
        tensors.push_back(
            {std::move(name), DType::kF32, {param.shape[1], param.shape[0]}, owned.back().data()});
      } else {
        tensors.push_back({std::move(name), DType::kF32, param.shape, data});
      }
    }
  const size_t lnf = params.size() - 2;
  tensors.push_back({"transformer.ln_f.weight", DType::kF32, params[lnf].shape,
                     ck.flat.data() + ck.offsets[lnf]});
  tensors.push_back({"transformer.ln_f.bias", DType::kF32, params[lnf + 1].shape,
                     ck.flat.data() + ck.offsets[lnf + 1]});
  ckpt::makeDirs(outDir);
  ckpt::writeSafetensors(outDir + "/model.safetensors", tensors, {{"format", "pt"}});
  ckpt::writeFileDurable(outDir + "/config.json", hfConfigJson(ck));
}

void exportLlmc(const std::string& root, const std::string& tag, const std::string& outPath,
                ExportShape shape) {
  const GptCheckpoint ck = loadGpt(root, tag, shape);
  int32_t header[256] = {};
  header[0] = 20240326;
  header[1] = 3;
  header[2] = ck.maxT;
  header[3] = ck.vocab;
  header[4] = ck.nLayer;
  header[5] = ck.nHead;
  header[6] = ck.nEmbd;
  header[7] = ck.paddedVocab;
  ckpt::DurableWriter out(outPath);
  out.write(header, sizeof header);
  out.write(ck.flat.data(), ck.flat.size() * sizeof(float));
  out.commit();
}

Gpt2WeightSource openGpt2Weights(const std::string& root, const std::string& tag,
                                 ExportShape shape) {
  std::unique_ptr<CheckpointReader> reader;
  const GptCheckpoint ck = openGpt(root, tag, shape, reader);
  Gpt2WeightSource src;
  src.facts.dir = ck.info.dir;
  src.facts.step = ck.info.step;
  src.facts.nLayer = ck.nLayer;
  src.facts.nHead = ck.nHead;
  src.facts.nEmbd = ck.nEmbd;
  src.facts.maxT = ck.maxT;
  src.facts.vocab = ck.vocab;
  src.facts.paddedVocab = ck.paddedVocab;
  src.numel = ck.offsets.back() + ck.info.params.back().numel;
  // Checked once here, as readModel would (names, order, shapes), before ranges are read.
  reader->checkParams(ck.info.params);
  // The fp32 master ranges when the checkpoint has them (as loadGpt reads), else the model file.
  const auto names = reader->stateNames();
  const bool masters = std::find(names.begin(), names.end(), "fp32") != names.end();
  std::shared_ptr<const CheckpointReader> shared(std::move(reader));
  src.read = [shared, masters](size_t offset, size_t count, float* out) {
    if (masters) shared->readRange(offset, count, "fp32", out);
    else shared->readModelRange(offset, count, out);
  };
  return src;
}

Gpt2Weights readGpt2Weights(const std::string& root, const std::string& tag, ExportShape shape) {
  GptCheckpoint ck = loadGpt(root, tag, shape);
  Gpt2Weights w;
  w.dir = ck.info.dir;
  w.step = ck.info.step;
  w.nLayer = ck.nLayer;
  w.nHead = ck.nHead;
  w.nEmbd = ck.nEmbd;
  w.maxT = ck.maxT;
  w.vocab = ck.vocab;
  w.paddedVocab = ck.paddedVocab;
  w.flat = std::move(ck.flat);
  return w;
}

}  // namespace ds::runtime
