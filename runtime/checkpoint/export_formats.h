// Exports of a GPT-2 checkpoint in formats other tools open: a Hugging Face transformers folder
// (GPT2LMHeadModel: config.json + model.safetensors with transformers' parameter names and its
// Conv1D layout) and an llm.c gpt2_*.bin (version 3, fp32). Both take the consolidated fp32
// parameters as exportConsolidated does (any stage, any world size). Not a reader of either
// format (runtime/model reads llm.c files). Only GPT-2 checkpoints (named as Gpt2Model names its
// parameters) are accepted; anything else is refused naming the checkpoint.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace ds::runtime {

// Model facts the parameter shapes do not carry: the head count and the real (unpadded)
// vocabulary. 0: take them from the checkpoint's recorded plan (client_state.plan_identity).
struct ExportShape {
  int nHead = 0;
  int vocabSize = 0;
};

// outDir (created if missing) gets config.json (GPT2Config: vocab_size, n_positions, n_ctx,
// n_embd, n_layer, n_head, layer_norm_epsilon 1e-5, activation_function gelu_new, architectures
// [GPT2LMHeadModel], no dropout, tied embeddings) and model.safetensors: transformer.wte.weight
// (the vocab_size real rows of wte), transformer.wpe.weight, transformer.h.N.{ln_1, attn.c_attn,
// attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj}.{weight, bias} with the linear weights transposed to
// [in, out], transformer.ln_f.{weight, bias}; metadata format "pt". lm_head is tied to wte and
// not stored, as transformers saves GPT-2.
void exportHuggingFace(const std::string& root, const std::string& tag, const std::string& outDir,
                       ExportShape shape = {});

// llm.c's model file: 256 int32 header (magic 20240326, version 3, maxT, V, L, NH, C, Vp), then
// every parameter in our (= llm.c's) order as fp32. Durable (temp file, fsync, rename).
void exportLlmc(const std::string& root, const std::string& tag, const std::string& outPath,
                ExportShape shape = {});

// The consolidated fp32 weights of a GPT-2 checkpoint (any ZeRO stage and world size, read as the
// exports read them) with the model facts, for `dsrt generate`. flat is in Gpt2Model's order.
struct Gpt2Weights {
  std::string dir;  // <root>/<tag>
  int64_t step = 0;
  int nLayer = 0, nHead = 0, nEmbd = 0, maxT = 0, vocab = 0, paddedVocab = 0;
  std::vector<float> flat;
};
Gpt2Weights readGpt2Weights(const std::string& root, const std::string& tag,
                            ExportShape shape = {});

// The same checkpoint opened without reading its weights: the facts (flat left empty), the
// element count, and a reader of flat ranges [offset, offset + count) in the same order (the
// rank files' byte ranges that hold them, nothing else), for a tensor-parallel rank that loads
// only its slices. The reader keeps the checkpoint open; ConfigError naming the range when the
// files do not cover it.
struct Gpt2WeightSource {
  Gpt2Weights facts;
  size_t numel = 0;
  std::function<void(size_t offset, size_t count, float* out)> read;
};
Gpt2WeightSource openGpt2Weights(const std::string& root, const std::string& tag,
                                 ExportShape shape = {});

}  // namespace ds::runtime
