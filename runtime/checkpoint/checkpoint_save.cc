// saveCheckpoint (see checkpoint.h). Order of durability: each rank's optimizer file and its entry
// (rank 0 also the model file) -> barrier -> rank 0 gathers the entries into manifest.json ->
// <root>/latest -> barrier. A crash before `latest` moves leaves the previous checkpoint current.
#include <cstdio>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include "core/error.h"
#include "core/log.h"
#include "core/safe_file.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/durable_file.h"
#include "runtime/checkpoint/layout.h"
#include "runtime/checkpoint/safetensors.h"

namespace ds::runtime {
namespace {

using nlohmann::json;

void checkRequest(const SaveRequest& r) {
  ckpt::checkTag(r.tag);
  if (r.dir.empty()) throw ConfigError("checkpoint: save directory is empty");
  if (r.worldSize < 1 || r.rank < 0 || r.rank >= r.worldSize) {
    throw InternalError(
        fmt::format("checkpoint: rank {} of world {} invalid", r.rank, r.worldSize));
  }
  if (r.params == nullptr) throw InternalError("checkpoint: SaveRequest.params is null");
  if (r.worldSize > 1 && !r.barrier) {
    throw InternalError("checkpoint: SaveRequest.barrier is required when world size > 1");
  }
  size_t total = 0;
  for (const auto& p : *r.params) total += p.numel;
  std::set<std::pair<std::string, size_t>> seen;
  for (const OptimRange& o : r.optimizer) {
    if (o.size == 0) continue;  // empty ranges are not written (their offset is meaningless)
    if (!seen.insert({o.name, o.offset}).second) {
      throw InternalError(fmt::format("checkpoint: two optimizer ranges {}@{}", o.name, o.offset));
    }
    if (o.offset + o.size > total || (o.size > 0 && o.data == nullptr)) {
      throw InternalError(
          fmt::format("checkpoint: optimizer range {}[{}, +{}) outside the {} "
                      "parameters or without data",
                      o.name, o.offset, o.size, total));
    }
  }
  if (!r.clientState.empty()) {
    json c = json::parse(r.clientState, nullptr, false);
    if (c.is_discarded() || !c.is_object()) {
      throw InternalError("checkpoint: SaveRequest.clientState must be a JSON object");
    }
  }
}

json fileEntry(const std::string& name, const std::string& kind, const ckpt::FileDigest& d) {
  return {{"name", name}, {"kind", kind}, {"bytes", d.bytes}, {"crc32c", ckpt::crcHex(d.crc32c)}};
}

json writeModel(const SaveRequest& r, const std::string& tagDir) {
  std::vector<ckpt::StTensor> ts;
  size_t off = 0;
  for (const auto& p : *r.params) {
    ts.push_back({p.name, DType::kF32, p.shape, r.fullParams + off});
    off += p.numel;
  }
  auto d = ckpt::writeSafetensors(tagDir + "/" + ckpt::kModelFile, ts,
                                  {{"format", "pt"}, {"step", std::to_string(r.step)}});
  return fileEntry(ckpt::kModelFile, "model", d);
}

json writeOptim(const SaveRequest& r, const std::string& tagDir) {
  std::vector<ckpt::StTensor> ts;
  json ranges = json::array();
  for (const OptimRange& o : r.optimizer) {
    if (o.size == 0) continue;  // an empty stage-3 chunk would collide with the next range's name
    ts.push_back({ckpt::rangeTensorName(o.name, o.offset),
                  DType::kF32,
                  {static_cast<int64_t>(o.size)},
                  o.data});
    ranges.push_back({{"state", o.name}, {"offset", o.offset}, {"size", o.size}});
  }
  const std::string name = ckpt::optimFileName(r.rank);
  auto d = ckpt::writeSafetensors(tagDir + "/" + name, ts,
                                  {{"rank", std::to_string(r.rank)},
                                   {"world_size", std::to_string(r.worldSize)},
                                   {"step", std::to_string(r.step)}});
  json e = fileEntry(name, "optim", d);
  e["rank"] = r.rank;
  e["world_size"] = r.worldSize;
  e["step"] = r.step;
  e["ranges"] = std::move(ranges);
  return e;
}

json manifestFor(const SaveRequest& r, json files) {
  json params = json::array();
  size_t off = 0;
  for (const auto& p : *r.params) {
    params.push_back({{"name", p.name}, {"shape", p.shape}, {"numel", p.numel}, {"offset", off}});
    off += p.numel;
  }
  return {{"format", ckpt::kFormat},
          {"version", ckpt::kFormatVersion},
          {"tag", r.tag},
          {"step", r.step},
          {"world_size", r.worldSize},
          {"zero_stage", r.zeroStage},
          {"dtype", r.dtype},
          {"plan_hash", r.planHash},
          {"numel", off},
          {"client_state", r.clientState.empty() ? json::object() : json::parse(r.clientState)},
          {"params", std::move(params)},
          {"files", std::move(files)}};
}

// Rank 0: every rank's entry must be there and agree on world size and step.
json gatherEntries(const SaveRequest& r, const std::string& tagDir) {
  json files = json::array();
  for (int k = 0; k < r.worldSize; ++k) {
    const std::string path = tagDir + "/" + ckpt::rankEntryFileName(k);
    json e = json::parse(ckpt::readTextFile(path), nullptr, false);
    if (e.is_discarded() || !e.is_object()) {
      throw ConfigError(fmt::format("checkpoint save: {} is not valid JSON", path));
    }
    if (e.value("world_size", -1) != r.worldSize || e.value("step", int64_t{-1}) != r.step) {
      throw ConfigError(fmt::format(
          "checkpoint save: {} says world size {} step {}, rank 0 has "
          "world size {} step {} (ranks saved different states)",
          path, e.value("world_size", -1), e.value("step", int64_t{-1}), r.worldSize, r.step));
    }
    files.push_back(std::move(e));
  }
  return files;
}

// A save killed mid-write (SIGKILL, power loss) leaves <name>.tmp.<pid> files beside the names
// it was writing. Each rank removes those of the names only it writes (no other rank can be
// writing them now), so a re-save into the folder starts clean.
void removeKilledSaveTemps(const SaveRequest& r, const std::string& writeDir) {
  std::vector<std::string> mine = {writeDir + "/" + ckpt::optimFileName(r.rank),
                                   writeDir + "/" + ckpt::rankEntryFileName(r.rank)};
  if (r.rank == 0) {
    mine.push_back(writeDir + "/" + ckpt::kModelFile);
    mine.push_back(writeDir + "/" + ckpt::kManifest);
    mine.push_back(r.dir + "/latest");
  }
  for (const auto& path : mine)
    for (const auto& gone : ds::removeStaleTemps(path))
      DS_LOG_INFO("checkpoint", "removed {}, left by a save that did not finish", gone);
}

}  // namespace

void saveCheckpoint(const SaveRequest& r) {
  checkRequest(r);
  const std::string tagDir = r.dir + "/" + r.tag;
  // A tag that already holds a complete checkpoint (e.g. the one `latest` names, re-saved after a
  // resume) is rebuilt beside it and swapped in whole, so no moment lacks a complete copy. Every
  // rank sees the same answer: manifests are only written after the first barrier.
  const bool restage = ckpt::fileExists(tagDir + "/" + ckpt::kManifest);
  const std::string writeDir = restage ? tagDir + ".saving" : tagDir;
  ckpt::makeDirs(writeDir);
  removeKilledSaveTemps(r, writeDir);
  json entry = writeOptim(r, writeDir);
  ckpt::writeFileDurable(writeDir + "/" + ckpt::rankEntryFileName(r.rank), entry.dump(1));
  json model;
  if (r.rank == 0 && r.fullParams != nullptr) model = writeModel(r, writeDir);
  if (r.barrier) r.barrier();  // every rank's files are durable past this point
  if (r.rank == 0) {
    json files = gatherEntries(r, writeDir);
    if (!model.is_null()) files.insert(files.begin(), model);
    ckpt::writeFileDurable(writeDir + "/" + ckpt::kManifest, manifestFor(r, files).dump(1));
    if (restage) {
      ckpt::swapDirs(writeDir, tagDir);
      ckpt::removeTree(writeDir);  // now the previous copy
    }
    ckpt::writeFileDurable(r.dir + "/latest", r.tag + "\n");
  }
  if (r.barrier) r.barrier();
}

}  // namespace ds::runtime
