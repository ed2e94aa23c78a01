// Model: the interface the training engine drives (GPT-2 and a small MLP), with explicit forward
// and backward per block. Not a parameter owner: values and grads come from a zero::ParamTable
// every time a block is entered (never cached across blocks; stage 3 frees them between blocks).
// Invariant: backward() ACCUMULATES (+=) into ParamTable.grad and walks blocks from last to 0.
// Shape as agreed in issue #4; additions: ModelConfig.paddedVocab (llm.c's Vp), numParamsTotal(),
// and the MLP batch convention below.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "runtime/model/param_init.h"
#include "zero/param_table.h"

namespace ds::runtime {

struct ModelConfig {
  std::string kind = "gpt2";  // "gpt2" | "mlp"
  // gpt2: seqLen is the position table size (llm.c maxT); forward accepts any T <= seqLen.
  int nLayer = 0, nHead = 0, nEmbd = 0, seqLen = 0, vocabSize = 0;
  int paddedVocab = 0;  // gpt2: rows of wte (llm.c Vp >= vocabSize); 0 means = vocabSize
  // mlp: in, hidden..., out. Batch convention: inputs[B*T] are token ids in [0, sizes[0]) fed as
  // one-hot rows (the first layer is a row gather), targets[B*T] are classes in [0, sizes.back()).
  // So an MLP with sizes {V, H, V} is a next-token (bigram) model on the same data as GPT-2.
  std::vector<int> sizes;
  bool activationCheckpointing = false;  // keep only block inputs; recompute in backward
  DType compute = DType::kF32;           // or kBF16: weights from ParamTable.value16
};

class Model {
 public:
  virtual ~Model() = default;
  // Canonical order. GPT-2: llm.c's flat layout (wte, wpe, h.0.ln1w .. h.{L-1}.ln1w, h.0.ln1b,
  // ..., lnfw, lnfb), so concatenating in this order equals llm.c's checkpoint payload.
  virtual const std::vector<zero::ParamInfo>& params() const = 0;
  size_t numParamsTotal() const;
  // Forward order. GPT-2: 0 = embeddings, 1..L = layers, L+1 = final LN + tied LM head + loss.
  // MLP: one block per linear layer.
  virtual int numBlocks() const = 0;
  // flat = all params concatenated in params() order. GPT-2 init as llm.c/GPT-2: N(0, 0.02),
  // residual projections (attprojw, fcprojw) scaled by 1/sqrt(2L), LN weights 1, biases 0.
  // Deterministic from seed, independent of thread count.
  virtual void initParams(float* flat, uint64_t seed) const = 0;
  // How parameter `param` is initialised (initParams applies exactly these rules).
  virtual ParamInitRule initRule(size_t param) const = 0;
  // Flat elements [offset, offset + count) of initParams(flat, seed), into out: the same bits,
  // computed without the rest (partitioned construction: a rank fills only its shard).
  void initParamRange(float* out, size_t offset, size_t count, uint64_t seed) const;
  // Mean cross-entropy over B*T positions (targets < 0 are ignored and not counted). Reads
  // p.value (kF32) or p.value16 (kBF16) of block b only between hooks.beforeForward(b) and
  // hooks.afterForward(b). T <= seqLen.
  virtual float forward(const int32_t* inputs, const int32_t* targets, int B, int T,
                        zero::ParamTable& p, zero::BlockHooks& hooks) = 0;
  // ACCUMULATES d(lossScale * loss)/dparam into p.grad (fp32); calls hooks.beforeBackward(b) /
  // afterBackward(b) from the last block to 0; reads values of block b only between them.
  virtual void backward(float lossScale, zero::ParamTable& p, zero::BlockHooks& hooks) = 0;
  // Bytes of activations held for backward at the last forward's B, T (0 before any forward),
  // including the per-block buffers the backward needs while it holds them (GPT-2: the fp32
  // block workspace that activation checkpointing recomputes into and bf16 widens into).
  virtual size_t activationBytes() const = 0;
  // Bytes of other transient working memory (gradient scratch, bf16 weight widening).
  virtual size_t workspaceBytes() const { return 0; }
  // Bytes the model holds in an Ops device's memory (activations, workspace); 0 on the host.
  virtual size_t deviceBytes() const { return 0; }
  // fwd+bwd FLOPs per token at sequence length seqLen: 6N (N without wpe) + attention 6*L*C*T.
  virtual double flopsPerToken() const = 0;
};

// Throws ConfigError naming the key on a bad shape (e.g. "n_embd (100) % n_head (3) != 0").
std::unique_ptr<Model> makeModel(const ModelConfig& cfg);

// Reads llm.c's gpt2_*.bin: 256 int32 header (magic 20240326, version 3 = fp32 or 5 = bf16,
// maxT, V, L, H, C, Vp), then the params in llm.c's order. Fills cfg (kind "gpt2", seqLen = maxT,
// paddedVocab = Vp) and flat (fp32; bf16 files are widened). ConfigError naming the file and what
// was expected on a bad magic/version/header or a truncated file.
void loadLlmcCheckpoint(const std::string& path, ModelConfig& cfg, std::vector<float>& flat);

}  // namespace ds::runtime
