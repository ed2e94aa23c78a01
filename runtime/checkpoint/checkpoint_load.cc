// CheckpointReader (see checkpoint.h): manifest validation, file presence/size/CRC checks, the
// model tensors, and readRange assembling optimizer states from any set of rank files.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <type_traits>

#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include "core/error.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/durable_file.h"
#include "runtime/checkpoint/layout.h"
#include "runtime/checkpoint/safetensors.h"

namespace ds::runtime {

using nlohmann::json;

struct CheckpointReader::Impl {
  struct Piece {
    size_t offset = 0, size = 0;
    const ckpt::SafetensorsReader* file = nullptr;
    const ckpt::SafetensorsReader::Entry* entry = nullptr;
  };
  CheckpointInfo info;
  std::string manifestPath;
  std::vector<std::unique_ptr<ckpt::SafetensorsReader>> files;
  const ckpt::SafetensorsReader* model = nullptr;
  std::map<std::string, std::vector<Piece>> states;  // sorted by offset
  size_t numel = 0;

  [[noreturn]] void bad(const std::string& what) const {
    throw ConfigError(fmt::format("checkpoint {}: {}", manifestPath, what));
  }
  void parseManifest(const json& m);
  void openFile(const json& f);
  void indexOptim(const json& f, const ckpt::SafetensorsReader& r);
  void checkModel(const ckpt::SafetensorsReader& r) const;
};

namespace {

// v as T when v holds a value of T's JSON type that T can represent: integers must be JSON
// integers within T's range (nlohmann converts 1e300 to int by an undefined cast), so a manifest
// of the wrong shape is refused by the caller, never by a library exception or UB.
template <typename T>
std::optional<T> typed(const json& v) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    if (v.is_number_unsigned()) {
      const auto u = v.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<T>::max())) return std::nullopt;
      return static_cast<T>(u);
    }
    if (!v.is_number_integer()) return std::nullopt;
    const auto x = v.get<int64_t>();
    if constexpr (std::is_signed_v<T>) {
      if (x < std::numeric_limits<T>::min() || x > std::numeric_limits<T>::max())
        return std::nullopt;
    } else if (x < 0 || static_cast<uint64_t>(x) > std::numeric_limits<T>::max()) {
      return std::nullopt;
    }
    return static_cast<T>(x);
  } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
    if (!v.is_array()) return std::nullopt;
    std::vector<int64_t> out;
    for (const json& e : v) {
      auto x = typed<int64_t>(e);
      if (!x) return std::nullopt;
      out.push_back(*x);
    }
    return out;
  } else {
    try {
      return v.get<T>();
    } catch (const json::exception&) {
      return std::nullopt;
    }
  }
}

template <typename T>
T field(const json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key)) {
    throw ConfigError(fmt::format("{}: missing key '{}'", where, key));
  }
  auto v = typed<T>(j.at(key));
  if (!v)
    throw ConfigError(
        fmt::format("{}: key '{}' has the wrong type ({})", where, key, j.at(key).dump()));
  return *v;
}

// j[key] when j is an object holding a value of T's JSON type there, else dflt (a manifest of
// the wrong shape must be refused by the checks, never by a JSON library exception).
template <typename T>
T valueOr(const json& j, const char* key, T dflt) {
  if (!j.is_object() || !j.contains(key)) return dflt;
  return typed<T>(j.at(key)).value_or(dflt);
}

}  // namespace

void CheckpointReader::Impl::parseManifest(const json& m) {
  const std::string& w = manifestPath;
  if (valueOr<std::string>(m, "format", "") != ckpt::kFormat) {
    bad(fmt::format("not a dsrun checkpoint manifest (format != \"{}\")", ckpt::kFormat));
  }
  if (field<int>(m, "version", w) != ckpt::kFormatVersion) {
    bad(fmt::format("manifest version {} unsupported (expected {})", m["version"].dump(),
                    ckpt::kFormatVersion));
  }
  info.tag = field<std::string>(m, "tag", w);
  info.step = field<int64_t>(m, "step", w);
  info.worldSize = field<int>(m, "world_size", w);
  info.zeroStage = field<int>(m, "zero_stage", w);
  info.dtype = field<std::string>(m, "dtype", w);
  info.planHash = field<std::string>(m, "plan_hash", w);
  info.clientState = m.contains("client_state") ? m["client_state"].dump() : "{}";
  size_t off = 0;
  for (const json& p : field<json>(m, "params", w)) {
    zero::ParamInfo pi;
    pi.name = field<std::string>(p, "name", w + " params[]");
    pi.shape = field<std::vector<int64_t>>(p, "shape", w + " params[" + pi.name + "]");
    pi.numel = field<size_t>(p, "numel", w + " params[" + pi.name + "]");
    size_t elems = 1;
    for (int64_t d : pi.shape) {
      if (d < 0 || (d > 0 && elems > SIZE_MAX / static_cast<size_t>(d)))
        bad(fmt::format("param '{}' has a bad shape {}", pi.name, json(pi.shape).dump()));
      elems *= static_cast<size_t>(d);
    }
    if (elems != pi.numel || pi.numel > SIZE_MAX - off)
      bad(fmt::format("param '{}' has numel {} but shape {}", pi.name, pi.numel,
                      json(pi.shape).dump()));
    if (field<size_t>(p, "offset", w) != off)
      bad(fmt::format("param '{}' offset out of order", pi.name));
    off += pi.numel;
    info.params.push_back(std::move(pi));
  }
  numel = off;
}

void CheckpointReader::Impl::openFile(const json& f) {
  const std::string name = field<std::string>(f, "name", manifestPath + " files[]");
  const std::string path = info.dir + "/" + name;
  const std::string kind = field<std::string>(f, "kind", manifestPath + " files[" + name + "]");
  if (!ckpt::fileExists(path)) {
    bad(fmt::format("{} file {} is missing{}", kind, path,
                    kind == "optim"
                        ? fmt::format(" (rank {} of {})", valueOr(f, "rank", -1), info.worldSize)
                        : ""));
  }
  {
    ckpt::ReadFile raw(path);  // size and checksum before trusting any header
    const uint64_t bytes = field<uint64_t>(f, "bytes", manifestPath);
    if (raw.size() != bytes) {
      bad(fmt::format("{} is {} bytes, the manifest says {} ({})", path, raw.size(), bytes,
                      raw.size() < bytes ? "truncated" : "extra bytes"));
    }
    const std::string want = field<std::string>(f, "crc32c", manifestPath);
    const std::string got = ckpt::crcHex(raw.crc32c());
    if (got != want) {
      bad(
          fmt::format("{} checksum mismatch: CRC32C {} but the manifest says {} (file corrupted or "
                      "replaced)",
                      path, got, want));
    }
  }
  auto reader = std::make_unique<ckpt::SafetensorsReader>(path);
  if (kind == "model") {
    checkModel(*reader);
    model = reader.get();
  } else if (kind == "optim") {
    indexOptim(f, *reader);
  } else {
    bad(fmt::format("file {} has unknown kind '{}'", name, kind));
  }
  files.push_back(std::move(reader));
}

void CheckpointReader::Impl::checkModel(const ckpt::SafetensorsReader& r) const {
  for (const auto& p : info.params) {
    const auto* e = r.find(p.name);
    if (e == nullptr) bad(fmt::format("{} lacks parameter '{}'", r.path(), p.name));
    if (e->shape != p.shape) {
      bad(fmt::format("{}: parameter '{}' has shape {} but the manifest says {}", r.path(), p.name,
                      json(e->shape).dump(), json(p.shape).dump()));
    }
  }
}

void CheckpointReader::Impl::indexOptim(const json& f, const ckpt::SafetensorsReader& r) {
  for (const json& rg : field<json>(f, "ranges", manifestPath)) {
    Piece pc;
    const std::string state = field<std::string>(rg, "state", manifestPath);
    pc.offset = field<size_t>(rg, "offset", manifestPath);
    pc.size = field<size_t>(rg, "size", manifestPath);
    const std::string tname = ckpt::rangeTensorName(state, pc.offset);
    pc.entry = r.find(tname);
    if (pc.entry == nullptr || pc.entry->numel != pc.size) {
      bad(fmt::format("{} lacks tensor '{}' of {} elements listed in the manifest", r.path(), tname,
                      pc.size));
    }
    if (pc.offset > numel || pc.size > numel - pc.offset) {
      bad(fmt::format("{}: range {} [{}, {}) beyond the {} parameters", r.path(), state, pc.offset,
                      pc.offset + pc.size, numel));
    }
    pc.file = &r;
    states[state].push_back(pc);
  }
}

CheckpointReader::CheckpointReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CheckpointReader::~CheckpointReader() = default;

std::string readLatestTag(const std::string& root) {
  const std::string path = root + "/latest";
  if (!ckpt::fileExists(path)) {
    throw ConfigError(fmt::format("{}: missing; no complete checkpoint under {}", path, root));
  }
  std::string tag = ckpt::readTextFile(path);
  while (!tag.empty() && std::isspace(static_cast<unsigned char>(tag.back()))) tag.pop_back();
  if (tag.empty()) throw ConfigError(fmt::format("{}: empty; expected a checkpoint tag", path));
  return tag;
}

std::unique_ptr<CheckpointReader> CheckpointReader::open(const std::string& root,
                                                         const std::string& tagIn) {
  const std::string tag = tagIn.empty() ? readLatestTag(root) : tagIn;
  ckpt::checkTag(tag);
  auto impl = std::make_unique<Impl>();
  impl->info.dir = root + "/" + tag;
  impl->manifestPath = impl->info.dir + "/" + ckpt::kManifest;
  if (!ckpt::fileExists(impl->manifestPath)) {
    throw ConfigError(
        fmt::format("checkpoint {}: manifest missing (incomplete checkpoint: the "
                    "save did not finish, or no tag '{}' under {})",
                    impl->manifestPath, tag, root));
  }
  json m = json::parse(ckpt::readTextFile(impl->manifestPath), nullptr, false);
  if (m.is_discarded()) impl->bad("manifest is not valid JSON (truncated or corrupted?)");
  impl->parseManifest(m);
  if (impl->info.tag != tag) {
    impl->bad(fmt::format("manifest names tag '{}' but lives in '{}'", impl->info.tag, tag));
  }
  std::vector<bool> rankSeen(static_cast<size_t>(std::max(impl->info.worldSize, 0)), false);
  for (const json& f : field<json>(m, "files", impl->manifestPath)) {
    if (valueOr<std::string>(f, "kind", "") == "optim") {
      int rk = valueOr(f, "rank", -1);
      if (rk < 0 || rk >= impl->info.worldSize)
        impl->bad(fmt::format("file entry with rank {}", rk));
      rankSeen[static_cast<size_t>(rk)] = true;
    }
    impl->openFile(f);
  }
  for (size_t k = 0; k < rankSeen.size(); ++k) {
    if (!rankSeen[k])
      impl->bad(fmt::format("no optimizer file listed for rank {} of {}", k, rankSeen.size()));
  }
  for (auto& [name, pieces] : impl->states) {
    std::sort(pieces.begin(), pieces.end(),
              [](const Impl::Piece& a, const Impl::Piece& b) { return a.offset < b.offset; });
  }
  return std::unique_ptr<CheckpointReader>(new CheckpointReader(std::move(impl)));
}

const CheckpointInfo& CheckpointReader::info() const { return impl_->info; }

void CheckpointReader::checkParams(const std::vector<zero::ParamInfo>& expected) const {
  const auto& have = impl_->info.params;
  for (size_t i = 0; i < std::max(have.size(), expected.size()); ++i) {
    if (i >= have.size()) {
      impl_->bad(fmt::format("has {} parameters, the model has {} (first missing: '{}')",
                             have.size(), expected.size(), expected[i].name));
    }
    if (i >= expected.size()) {
      impl_->bad(fmt::format("has {} parameters, the model has {} (first extra: '{}')", have.size(),
                             expected.size(), have[i].name));
    }
    if (have[i].name != expected[i].name) {
      impl_->bad(fmt::format("parameter {} is '{}', the model expects '{}'", i, have[i].name,
                             expected[i].name));
    }
    if (have[i].shape != expected[i].shape) {
      impl_->bad(fmt::format("parameter '{}' has shape {}, the model expects {}", have[i].name,
                             json(have[i].shape).dump(), json(expected[i].shape).dump()));
    }
  }
}

void CheckpointReader::readModel(const std::vector<zero::ParamInfo>& expected, float* flat) const {
  checkParams(expected);
  if (impl_->model == nullptr) {  // no model file: the fp32 master ranges hold the same values
    readRange(0, impl_->numel, "fp32", flat);
    return;
  }
  size_t off = 0;
  for (const auto& p : impl_->info.params) {
    const auto* e = impl_->model->find(p.name);
    impl_->model->readF32(*e, 0, p.numel, flat + off);
    off += p.numel;
  }
}

void CheckpointReader::readModelRange(size_t offset, size_t size, float* out) const {
  if (offset > impl_->numel || size > impl_->numel - offset)
    impl_->bad(fmt::format("model read of flat elements [{}, {}) beyond the {} parameters", offset,
                           offset + size, impl_->numel));
  if (impl_->model == nullptr) {  // no model file: the fp32 master ranges hold the same values
    readRange(offset, size, "fp32", out);
    return;
  }
  size_t begin = 0;
  for (const auto& p : impl_->info.params) {
    const size_t end = begin + p.numel;
    if (size > 0 && offset < end) {
      const size_t n = std::min(size, end - offset);
      impl_->model->readF32(*impl_->model->find(p.name), offset - begin, n, out);
      out += n;
      offset += n;
      size -= n;
    }
    begin = end;
  }
}

void CheckpointReader::readRange(size_t offset, size_t size, const std::string& name,
                                 float* out) const {
  auto it = impl_->states.find(name);
  if (it == impl_->states.end()) {
    impl_->bad(
        fmt::format("no optimizer state '{}' (has: {})", name, fmt::join(stateNames(), ", ")));
  }
  size_t pos = offset;
  const size_t end = offset + size;
  for (const Impl::Piece& pc : it->second) {
    if (pos >= end) break;
    if (pc.offset + pc.size <= pos) continue;
    if (pc.offset > pos) break;  // gap
    const size_t n = std::min(end, pc.offset + pc.size) - pos;
    pc.file->readF32(*pc.entry, pos - pc.offset, n, out + (pos - offset));
    pos += n;
  }
  if (pos < end) {
    impl_->bad(
        fmt::format("optimizer state '{}' has no data for flat elements [{}, {}) (the rank "
                    "files cover less than the model)",
                    name, pos, end));
  }
}

std::function<void(size_t, size_t, const std::string&, float*)> CheckpointReader::rangeReader()
    const {
  return [this](size_t o, size_t s, const std::string& n, float* out) { readRange(o, s, n, out); };
}

std::vector<std::string> CheckpointReader::stateNames() const {
  std::vector<std::string> v;
  for (const auto& [name, pieces] : impl_->states) v.push_back(name);
  return v;
}

}  // namespace ds::runtime
