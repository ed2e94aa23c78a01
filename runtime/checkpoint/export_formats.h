// Exports of a GPT-2 checkpoint in formats other tools open: a Hugging Face transformers folder
// (GPT2LMHeadModel: config.json + model.safetensors with transformers' parameter names and its
// Conv1D layout) and an llm.c gpt2_*.bin (version 3, fp32). Both take the consolidated fp32
// parameters as exportConsolidated does (any stage, any world size). Not a reader of either
// format (runtime/model reads llm.c files). Only GPT-2 checkpoints (named as Gpt2Model names its
// parameters) are accepted; anything else is refused naming the checkpoint.
#pragma once

#include <string>

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

}  // namespace ds::runtime
