// Checkpoint save/load per DESIGN §4.10: <dir>/<tag>/ holds model.safetensors (full fp32 params,
// rank 0), optim_rank_NNNNN.safetensors (each rank's ZeroEngine::optimizerShard() ranges) and
// manifest.json (world size, stage, step, dtype, params, per-file CRC32C, plan hash, client state).
// <dir>/latest names the newest complete tag and is replaced atomically only after every rank's
// files are durable. Not a transport: ranks must share the file system; the caller supplies the
// barrier. Loading works across ZeRO stages and world sizes (ranges are in the flat space).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "zero/param_table.h"

namespace ds::runtime {

// One contiguous range of one optimizer state of this rank, in the full flat parameter space
// (ZeroEngine::ShardTensor without ownership: data must stay valid during saveCheckpoint).
struct OptimRange {
  std::string name;             // "fp32", "exp_avg", "exp_avg_sq", "momentum"
  size_t offset = 0, size = 0;  // elements in the flat space (no padding)
  const float* data = nullptr;  // [size]
};

struct SaveRequest {
  std::string dir;  // checkpoint root (created if missing)
  std::string tag;  // e.g. "global_step100"; same on every rank
  int rank = 0, worldSize = 1;
  int zeroStage = 0;
  int64_t step = 0;            // optimizer steps taken (ZeroEngine::stepCount())
  std::string dtype = "fp32";  // compute dtype of the run ("fp32" | "bf16"), informational
  std::string planHash;        // caller's hash of the resolved plan, stored and reported
  const std::vector<zero::ParamInfo>* params = nullptr;  // model order (required on every rank)
  // Rank 0: full fp32 flat params in params order (ZeroEngine::getParams, collective at stage 3,
  // so every rank calls it); others null. See zero_ranges.h for the optimizer side.
  const float* fullParams = nullptr;
  std::vector<OptimRange> optimizer;  // this rank's shard (any number of ranges)
  std::string clientState;  // rank 0: JSON object text (scheduler, scaler, data cursor, ...)
  // Collective barrier over all ranks (comm is the caller's). May be empty when worldSize == 1.
  // Called twice: after this rank's files are durable, and after `latest` is published.
  std::function<void()> barrier;
};

// Writes this rank's files (temp name, fsync, rename, fsync dir); rank 0 then writes the manifest
// and replaces <dir>/latest. Every rank must call it. Throws ds::Error naming the file on failure.
void saveCheckpoint(const SaveRequest& req);

// What manifest.json says (validated on open).
struct CheckpointInfo {
  std::string tag, dir;  // dir = <root>/<tag>
  int worldSize = 0, zeroStage = 0;
  int64_t step = 0;
  std::string dtype, planHash, clientState;  // clientState: JSON text ("{}" when none)
  std::vector<zero::ParamInfo> params;       // name, shape, numel (blocks/decay not stored)
};

// Read side. open() reads <root>/latest when tag is empty, parses the manifest, checks that every
// listed file exists with the listed size and CRC32C, and refuses anything else with an error
// naming the file and what is wrong. Not thread-safe.
class CheckpointReader {
 public:
  static std::unique_ptr<CheckpointReader> open(const std::string& root,
                                                const std::string& tag = "");
  ~CheckpointReader();
  const CheckpointInfo& info() const;
  // Refuses (ConfigError naming the manifest) when names, order or shapes differ from `expected`.
  void checkParams(const std::vector<zero::ParamInfo>& expected) const;
  // Full fp32 params in params order (checkParams first); flat must hold sum(numel).
  void readModel(const std::vector<zero::ParamInfo>& expected, float* flat) const;
  // Flat elements [offset, offset + size) of the model (checkParams first): what readModel
  // writes there, read without the rest (a stage-3 rank loads only its shard).
  void readModelRange(size_t offset, size_t size, float* out) const;
  // Serves ZeroEngine::loadOptimizerState: assembles [offset, offset+size) of state `name` from
  // whichever rank files cover it; throws naming the state and the uncovered range otherwise.
  void readRange(size_t offset, size_t size, const std::string& name, float* out) const;
  std::function<void(size_t, size_t, const std::string&, float*)> rangeReader() const;
  std::vector<std::string> stateNames() const;  // optimizer states present ("fp32", ...)

  struct Impl;

 private:
  explicit CheckpointReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Tag named by <root>/latest (trimmed); throws naming the file when it is missing or empty.
std::string readLatestTag(const std::string& root);

// One consolidated fp32 safetensors file (tensor per parameter, named and shaped as in the
// manifest; __metadata__ carries step and tag), built from the ranks' "fp32" master ranges
// (falling back to model.safetensors). Written to a temp name, fsync'd and renamed.
void exportConsolidated(const std::string& root, const std::string& tag,
                        const std::string& outPath);

}  // namespace ds::runtime
