// ParamTable: where each model parameter's values and gradient live right now. The owner of the
// parameters (zero::ZeroEngine) fills it; the model reads it every time it enters a block (never
// caches a pointer across blocks), because stage 3 gathers a block's parameters just before use
// and frees them after. Not thread-safe; the training thread reads, hooks write.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace ds::zero {

// Static description of one parameter tensor, in the model's canonical order (llm.c's for GPT-2).
struct ParamInfo {
  std::string name;            // e.g. "wte", "h.3.attn.qkv.w" or llm.c's "ln1w"
  std::vector<int64_t> shape;  // row-major
  size_t numel = 0;
  std::vector<int> blocks;  // forward blocks that read it; >1 entry for tied weights
  bool decay = true;        // weight decay applies (false for biases and LayerNorm)
  // Stage 3 (host BlockedStage) only: split into whole rows (shape[0]) over the data-parallel
  // ranks and never gathered; the model reads and writes this rank's rows in place
  // (ParamTable.value/grad point at them: the GPT-2 vocabulary-parallel head, gpt2_data_vocab.h).
  bool rowSharded = false;
  // Which part of its block's backward reads it, for a parameter of one block: parts run in
  // order 0, 1, ..., and the model calls BlockHooks::beforeBackwardPart(block, k) between them,
  // after which parameters of parts < k are neither read nor given gradient in that block again
  // (GPT-2's layers: 0 = the MLP half, 1 = the attention half). Stage 3 releases their gathered
  // copies and reduces their gradients there, and prefetches the next block at the last part
  // instead of at beforeBackward (docs/zero.md). 0 everywhere for a model without parts.
  int backwardPart = 0;
  // The model can give this parameter's gradient in chunks of whole rows (shape[0]) during the
  // backward of its last use, through ParamTable::rowSink, instead of accumulating it in
  // ParamTable::grad (GPT-2's tied wte: the LM head's product waits for the embedding's
  // backward). The engine decides whether to take it that way (stage 2 does).
  bool gradByRows = false;
};

// Receives a gradByRows parameter's gradient in chunks of whole rows, each row once per
// micro-step, chunks in row order, all of them before the backward of the block that completes
// the parameter ends (ZeRO stage 2: each chunk goes out as its own reduce bucket, so the
// parameter's full-size gradient is never held).
class GradRowSink {
 public:
  virtual ~GradRowSink() = default;
  virtual size_t rowsPerChunk(size_t param) const = 0;  // >= 1
  // A zeroed buffer of rows x (numel / shape[0]) elements for rows [first, first + rows) of
  // param's gradient (rows <= rowsPerChunk), valid until endRows.
  virtual float* beginRows(size_t param, size_t first, size_t rows) = 0;
  // The buffer holds this rank's whole contribution of this micro-step to those rows.
  virtual void endRows(size_t param, size_t first, size_t rows) = 0;
};

// A rowSharded parameter's value and grad point at this rank's rows only (Stage3Layout::ownRange,
// whole rows), for the whole run; its grad is the sum over the stage's partition group (the
// model computes it from every rank's tokens), so no reduction follows (MiCS then sums the shard
// groups' gradient partitions, this one's rows included). ZeRO++'s qwZ, hpZ and qgZ skip it.
struct ParamTable {
  std::vector<float*> value;  // [numParams] fp32 values (full tensor), or nullptr
  // [numParams] 16-bit copies when computing in 16 bits, else null: bf16, or fp16 bits (read
  // them as ds::fp16) when the compute dtype is fp16 (the host engine's and the device engine's
  // fp16 copies; the pointer type stays bf16 so every owner shares one table layout).
  std::vector<const bf16*> value16;
  std::vector<float*> grad;  // [numParams] fp32 gradient accumulators (full tensor)
  // [numParams], or empty: a non-null entry takes that (gradByRows) parameter's gradient, whose
  // grad entry is then null (GradRowSink).
  std::vector<GradRowSink*> rowSink;
};

// The training loop's notifications, called by the model around each block. Block numbering is
// the forward order: block 0 first in forward, last in backward.
class BlockHooks {
 public:
  virtual ~BlockHooks() = default;
  virtual void beforeForward(int block) = 0;
  virtual void afterForward(int block) = 0;
  virtual void beforeBackward(int block) = 0;
  virtual void afterBackward(int block) = 0;  // this block's gradient contributions are done
  // Inside block's backward, before its part `part` >= 1 (ParamInfo::backwardPart): the
  // parameters of earlier parts are done for this block. Optional for the owner (default: no-op);
  // a wrapper forwards it.
  virtual void beforeBackwardPart(int /*block*/, int /*part*/) {}
};

}  // namespace ds::zero
