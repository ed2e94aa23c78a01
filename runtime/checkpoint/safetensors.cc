// safetensors writer and validating reader (see safetensors.h).
#include "runtime/checkpoint/safetensors.h"

#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include "core/error.h"
#include "runtime/checkpoint/durable_file.h"

namespace ds::runtime::ckpt {
namespace {

constexpr uint64_t kMaxHeader = 100u << 20;  // safetensors' own limit is 100 MB

bool parseDtype(const std::string& s, DType* out) {
  static const std::pair<const char*, DType> kTable[] = {
      {"F32", DType::kF32}, {"F16", DType::kF16}, {"BF16", DType::kBF16}, {"I32", DType::kI32},
      {"I64", DType::kI64}, {"U8", DType::kU8},   {"U16", DType::kU16}};
  for (const auto& [name, dt] : kTable) {
    if (s == name) {
      *out = dt;
      return true;
    }
  }
  return false;
}

// One tensor entry of the header, validated against the data section (absolute offsets out).
SafetensorsReader::Entry parseEntry(const std::string& name, const nlohmann::json& t,
                                    uint64_t dataStart, uint64_t dataBytes,
                                    const std::string& path) {
  auto bad = [&](const std::string& what) {
    return ConfigError(fmt::format("{}: not a valid safetensors file: {}", path, what));
  };
  SafetensorsReader::Entry e;
  e.name = name;
  if (!t.is_object() || !t.contains("dtype") || !t.contains("shape") ||
      !t.contains("data_offsets")) {
    throw bad(fmt::format("tensor '{}' lacks dtype, shape or data_offsets", e.name));
  }
  if (!t["dtype"].is_string() || !parseDtype(t["dtype"].get<std::string>(), &e.dtype)) {
    throw bad(fmt::format("tensor '{}' has unknown dtype {}", e.name, t["dtype"].dump()));
  }
  e.numel = 1;
  if (!t["shape"].is_array()) throw bad(fmt::format("tensor '{}' shape is not a list", e.name));
  for (const auto& d : t["shape"]) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0) {
      throw bad(fmt::format("tensor '{}' has a bad dimension {}", e.name, d.dump()));
    }
    e.shape.push_back(d.get<int64_t>());
    e.numel *= static_cast<uint64_t>(d.get<int64_t>());
  }
  const auto& o = t["data_offsets"];
  if (!o.is_array() || o.size() != 2 || !o[0].is_number_unsigned() || !o[1].is_number_unsigned()) {
    throw bad(fmt::format("tensor '{}' data_offsets is not [begin, end]", e.name));
  }
  const uint64_t b = o[0].get<uint64_t>(), en = o[1].get<uint64_t>();
  if (b > en || en > dataBytes) {
    throw bad(
        fmt::format("tensor '{}' data_offsets [{}, {}] outside the {} data bytes (file "
                    "truncated?)",
                    e.name, b, en, dataBytes));
  }
  if (en - b != e.numel * dtypeSize(e.dtype)) {
    throw bad(fmt::format("tensor '{}' has {} bytes but shape x dtype needs {}", e.name, en - b,
                          e.numel * dtypeSize(e.dtype)));
  }
  e.begin = dataStart + b;
  e.end = dataStart + en;
  return e;
}

}  // namespace

FileDigest writeSafetensors(const std::string& path, const std::vector<StTensor>& tensors,
                            const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  if (!metadata.empty()) h["__metadata__"] = metadata;
  uint64_t off = 0;
  for (const StTensor& t : tensors) {
    uint64_t numel = 1;
    for (int64_t d : t.shape) numel *= static_cast<uint64_t>(d);
    const uint64_t bytes = numel * dtypeSize(t.dtype);
    h[t.name] = {{"dtype", std::string(dtypeSafetensorsName(t.dtype))},
                 {"shape", t.shape},
                 {"data_offsets", {off, off + bytes}}};
    off += bytes;
  }
  std::string header = h.dump();
  header.append((8 - header.size() % 8) % 8, ' ');
  const uint64_t n = header.size();
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(n >> (8 * i));
  DurableWriter w(path);
  w.write(len, 8);
  w.write(header.data(), header.size());
  for (const StTensor& t : tensors) {
    uint64_t numel = 1;
    for (int64_t d : t.shape) numel *= static_cast<uint64_t>(d);
    if (numel > 0) w.write(t.data, numel * dtypeSize(t.dtype));
  }
  w.commit();
  return {w.bytes(), w.crc()};
}

SafetensorsReader::SafetensorsReader(const std::string& path)
    : file_(std::make_unique<ReadFile>(path)) {
  auto bad = [&](const std::string& what) {
    return ConfigError(fmt::format("{}: not a valid safetensors file: {}", path, what));
  };
  if (file_->size() < 8)
    throw bad(fmt::format("{} bytes, shorter than the 8-byte header length", file_->size()));
  uint8_t len[8];
  file_->read(0, len, 8);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(len[i]) << (8 * i);
  if (n > kMaxHeader || 8 + n > file_->size()) {
    throw bad(fmt::format("header length {} exceeds the file ({} bytes)", n, file_->size()));
  }
  std::string text(static_cast<size_t>(n), '\0');
  file_->read(8, text.data(), text.size());
  nlohmann::json h;
  try {
    h = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw bad(fmt::format("header is not JSON ({})", e.what()));
  }
  if (!h.is_object()) throw bad("header is not a JSON object");
  const uint64_t dataStart = 8 + n, dataBytes = file_->size() - dataStart;
  for (auto it = h.begin(); it != h.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) throw bad("__metadata__ is not an object");
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string()) throw bad(fmt::format("__metadata__.{} is not a string", m.key()));
        metadata_[m.key()] = m->get<std::string>();
      }
      continue;
    }
    Entry e = parseEntry(it.key(), *it, dataStart, dataBytes, path);
    index_[e.name] = entries_.size();
    entries_.push_back(std::move(e));
  }
}

SafetensorsReader::~SafetensorsReader() = default;

const std::string& SafetensorsReader::path() const { return file_->path(); }

const SafetensorsReader::Entry* SafetensorsReader::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

void SafetensorsReader::readF32(const Entry& e, uint64_t first, size_t count, float* out) const {
  if (first + count > e.numel) {
    throw InternalError(fmt::format("{}: read of elements [{}, {}) past tensor '{}' ({} elements)",
                                    path(), first, first + count, e.name, e.numel));
  }
  if (e.dtype == DType::kF32) {
    file_->read(e.begin + first * 4, out, count * 4);
  } else if (e.dtype == DType::kBF16) {
    std::vector<bf16> tmp(count);
    file_->read(e.begin + first * 2, tmp.data(), count * 2);
    for (size_t i = 0; i < count; ++i) out[i] = bf16ToFloat(tmp[i]);
  } else {
    throw ConfigError(fmt::format("{}: tensor '{}' is {}, expected F32 or BF16", path(), e.name,
                                  dtypeSafetensorsName(e.dtype)));
  }
}

}  // namespace ds::runtime::ckpt
