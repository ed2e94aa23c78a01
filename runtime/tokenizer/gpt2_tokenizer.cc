// GPT-2 byte-level BPE: loading encoder.json + vocab.bpe or tokenizer.json, encode, decode; see
// gpt2_tokenizer.h.
#include "runtime/tokenizer/gpt2_tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "runtime/tokenizer/gpt2_pretokenize.h"
#include "runtime/tokenizer/unicode.h"

namespace ds::runtime {
namespace {

using Json = nlohmann::json;

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

// bytes_to_unicode(): the printable Latin-1 bytes stand for themselves, the other 68 bytes for
// U+0100 onwards in byte order. Returns byte -> code point.
std::vector<uint32_t> byteToCodePoint() {
  std::vector<uint32_t> map(256);
  uint32_t n = 0;
  for (uint32_t b = 0; b < 256; ++b) {
    bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
    map[b] = printable ? b : 256 + n++;
  }
  return map;
}

std::string readFile(const std::string& path, const std::string& what) {
  if (std::filesystem::is_directory(path))
    throw ConfigError(fmt::format("tokenizer: '{}' is a folder; expected {}", path, what));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(fmt::format("tokenizer: cannot read '{}' ({})", path, what));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Json parseJson(const std::string& path, const std::string& what) {
  std::string text = readFile(path, what);
  try {
    return Json::parse(text);
  } catch (const Json::exception& e) {  // parse_error, or out_of_range for 1e999
    throw ConfigError(
        fmt::format("tokenizer: '{}' is not valid JSON ({}): {}", path, what, e.what()));
  }
}

// A {"token": id, ...} object into vocab; `where` names the file and key for messages.
void readVocabObject(const Json& obj, const std::string& where,
                     std::unordered_map<std::string, int32_t>& vocab) {
  if (!obj.is_object())
    throw ConfigError(fmt::format("tokenizer: {} must be a JSON object of token -> id", where));
  for (const auto& [tok, id] : obj.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
        id.get<int64_t>() > std::numeric_limits<int32_t>::max())
      throw ConfigError(fmt::format("tokenizer: {}: token {} has id {}; expected an integer >= 0",
                                    where, Json(tok).dump(), id.dump()));
    vocab[tok] = static_cast<int32_t>(id.get<int64_t>());
  }
}

}  // namespace

std::unique_ptr<Gpt2Tokenizer> Gpt2Tokenizer::load(const std::string& path) {
  namespace fs = std::filesystem;
  if (path.empty())
    throw ConfigError(
        "tokenizer gpt2: needs a vocabulary: a folder with encoder.json and vocab.bpe, or a "
        "tokenizer.json file");
  if (fs::is_directory(path)) {
    auto in = [&](const char* name) { return (fs::path(path) / name).string(); };
    // GPT-2's release names, then a Hugging Face model folder's (the same two formats), then a
    // Hugging Face tokenizer.json.
    if (!fs::exists(in("encoder.json"))) {
      if (fs::exists(in("vocab.json")) && fs::exists(in("merges.txt")))
        return fromEncoderFiles(in("vocab.json"), in("merges.txt"));
      if (fs::exists(in("tokenizer.json"))) return fromTokenizerJson(in("tokenizer.json"));
    }
    for (const auto& f : {in("encoder.json"), in("vocab.bpe")})
      if (!fs::exists(f))
        throw ConfigError(fmt::format(
            "tokenizer gpt2: '{}' does not exist; expected the folder '{}' to hold GPT-2's "
            "vocabulary: encoder.json and vocab.bpe (or vocab.json and merges.txt, or "
            "tokenizer.json)",
            f, path));
    return fromEncoderFiles(in("encoder.json"), in("vocab.bpe"));
  }
  if (!fs::exists(path))
    throw ConfigError(fmt::format(
        "tokenizer gpt2: '{}' does not exist; expected a folder with encoder.json and vocab.bpe, "
        "or a tokenizer.json file",
        path));
  return fromTokenizerJson(path);
}

std::unique_ptr<Gpt2Tokenizer> Gpt2Tokenizer::fromEncoderFiles(const std::string& encoderJson,
                                                               const std::string& vocabBpe) {
  std::unordered_map<std::string, int32_t> vocab;
  readVocabObject(parseJson(encoderJson, "GPT-2's encoder.json, a token -> id object"),
                  "'" + encoderJson + "'", vocab);
  std::string text = readFile(vocabBpe, "GPT-2's vocab.bpe, one merge \"a b\" a line");
  std::vector<std::pair<std::string, std::string>> merges;
  std::vector<std::string> where;
  std::istringstream lines(text);
  std::string line;
  for (int lineNo = 1; std::getline(lines, line); ++lineNo) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (lineNo == 1 && line.rfind("#version", 0) == 0)) continue;
    size_t sp = line.find(' ');
    if (sp == 0 || sp == std::string::npos || sp + 1 == line.size() ||
        line.find(' ', sp + 1) != std::string::npos)
      throw ConfigError(fmt::format(
          "tokenizer: '{}' line {}: expected a merge of two tokens separated by one space, got "
          "'{}'",
          vocabBpe, lineNo, line));
    merges.emplace_back(line.substr(0, sp), line.substr(sp + 1));
    where.push_back(fmt::format("'{}' line {}", vocabBpe, lineNo));
  }
  auto t = std::unique_ptr<Gpt2Tokenizer>(new Gpt2Tokenizer());
  t->source_ = encoderJson + " + " + vocabBpe;
  t->build(vocab, merges, where, "'" + encoderJson + "'");
  return t;
}

std::unique_ptr<Gpt2Tokenizer> Gpt2Tokenizer::fromTokenizerJson(const std::string& path) {
  Json j = parseJson(path, "a Hugging Face tokenizer.json");
  auto where = [&](const std::string& key) { return fmt::format("'{}' key {}", path, key); };
  auto need = [&](bool ok, const std::string& key, const std::string& expected) {
    if (!ok)
      throw ConfigError(
          fmt::format("tokenizer: {}: expected {} (GPT-2's byte-level BPE)", where(key), expected));
  };
  need(j.is_object() && j.contains("model") && j["model"].is_object(), "model", "an object");
  const Json& model = j["model"];
  need(model.value("type", "") == "BPE", "model.type", "\"BPE\"");
  need(!j.contains("normalizer") || j["normalizer"].is_null(), "normalizer", "null");
  const Json pre = j.value("pre_tokenizer", Json());
  need(pre.is_object() && pre.value("type", "") == "ByteLevel", "pre_tokenizer.type",
       "\"ByteLevel\"");
  need(!pre.value("add_prefix_space", false), "pre_tokenizer.add_prefix_space", "false");
  need(pre.value("use_regex", true), "pre_tokenizer.use_regex", "true");
  need(model.contains("vocab"), "model.vocab", "a token -> id object");
  std::unordered_map<std::string, int32_t> vocab;
  readVocabObject(model["vocab"], where("model.vocab"), vocab);
  if (j.contains("added_tokens")) {
    need(j["added_tokens"].is_array(), "added_tokens", "an array");
    for (const auto& a : j["added_tokens"]) {
      need(a.is_object() && a.contains("id") && a["id"].is_number_integer() && a["id"] >= 0 &&
               a.contains("content") && a["content"].is_string(),
           "added_tokens", "objects with an integer id and a string content");
      vocab[a["content"].get<std::string>()] = a["id"].get<int32_t>();
    }
  }
  need(model.contains("merges") && model["merges"].is_array(), "model.merges", "an array");
  std::vector<std::pair<std::string, std::string>> merges;
  std::vector<std::string> mwhere;
  const Json& ms = model["merges"];
  for (size_t i = 0; i < ms.size(); ++i) {
    const Json& m = ms[i];
    std::string key = fmt::format("model.merges[{}]", i);
    if (m.is_string()) {  // "a b"
      std::string s = m.get<std::string>();
      size_t sp = s.find(' ');
      need(sp != std::string::npos && sp > 0 && sp + 1 < s.size() &&
               s.find(' ', sp + 1) == std::string::npos,
           key, "\"a b\": two tokens separated by one space");
      merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    } else {  // ["a", "b"]
      need(m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string(), key,
           "\"a b\" or [\"a\", \"b\"]");
      merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    }
    mwhere.push_back(where(key));
  }
  auto t = std::unique_ptr<Gpt2Tokenizer>(new Gpt2Tokenizer());
  t->source_ = path;
  t->build(vocab, merges, mwhere, where("model.vocab"));
  return t;
}

void Gpt2Tokenizer::build(const std::unordered_map<std::string, int32_t>& vocab,
                          const std::vector<std::pair<std::string, std::string>>& merges,
                          const std::vector<std::string>& mergeWhere,
                          const std::string& vocabWhere) {
  // Ids must be 0..n-1, each once.
  bytesOf_.assign(vocab.size(), std::string());
  std::vector<const std::string*> tokenOf(vocab.size(), nullptr);
  for (const auto& [tok, id] : vocab) {
    if (static_cast<size_t>(id) >= vocab.size() || tokenOf[static_cast<size_t>(id)])
      throw ConfigError(
          fmt::format("tokenizer: {}: ids must be 0..{} with each used once; token {} has id {}",
                      vocabWhere, vocab.size() - 1, Json(tok).dump(), id));
    tokenOf[static_cast<size_t>(id)] = &tok;
  }
  // Each token's bytes: its characters through the inverse byte map; a token with characters
  // outside the map (a special token such as "<|endoftext|>" is inside it) is refused.
  std::vector<uint32_t> cpOf = byteToCodePoint();
  std::unordered_map<uint32_t, char> byteOfCp;
  for (uint32_t b = 0; b < 256; ++b) byteOfCp[cpOf[b]] = static_cast<char>(b);
  for (size_t id = 0; id < tokenOf.size(); ++id) {
    const std::string& tok = *tokenOf[id];
    for (size_t pos = 0; pos < tok.size();) {
      auto d = unicode::decodeAt(tok, pos);
      auto it = byteOfCp.find(d.cp);
      if (it == byteOfCp.end())
        throw ConfigError(fmt::format(
            "tokenizer: {}: token {} (id {}) has a character outside GPT-2's byte alphabet",
            vocabWhere, Json(tok).dump(), id));
      bytesOf_[id] += it->second;
      pos += d.len;
    }
  }
  for (uint32_t b = 0; b < 256; ++b) {
    auto it = vocab.find(utf8(cpOf[b]));
    if (it == vocab.end())
      throw ConfigError(fmt::format("tokenizer: {}: no token for byte {} (character {})",
                                    vocabWhere, b, Json(utf8(cpOf[b])).dump()));
    byteId_[b] = it->second;
  }
  for (size_t r = 0; r < merges.size(); ++r) {
    const auto& [a, b] = merges[r];
    auto ia = vocab.find(a), ib = vocab.find(b), ic = vocab.find(a + b);
    if (ia == vocab.end() || ib == vocab.end() || ic == vocab.end())
      throw ConfigError(fmt::format(
          "tokenizer: {}: merge \"{} {}\": {} is not in the vocabulary {}", mergeWhere[r], a, b,
          Json(ia == vocab.end()   ? a
               : ib == vocab.end() ? b
                                   : a + b)
              .dump(),
          vocabWhere));
    uint64_t key = (uint64_t(uint32_t(ia->second)) << 32) | uint32_t(ib->second);
    // A repeated merge keeps its last rank, as dict(zip(merges, range(n))) in encoder.py.
    merges_.insert_or_assign(key, Merge{static_cast<int32_t>(r), ic->second});
  }
  auto eos = vocab.find("<|endoftext|>");
  eos_ = eos == vocab.end() ? -1 : eos->second;
}

void Gpt2Tokenizer::bpe(std::string_view piece, std::vector<int32_t>& out) const {
  std::vector<int32_t> word;
  word.reserve(piece.size());
  for (char c : piece) word.push_back(byteId_[static_cast<unsigned char>(c)]);
  auto pairKey = [](int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); };
  std::vector<int32_t> next;
  while (word.size() > 1) {
    // The ranked pair of lowest rank; then every occurrence of it merges, left to right.
    const Merge* best = nullptr;
    uint64_t bestKey = 0;
    for (size_t i = 0; i + 1 < word.size(); ++i) {
      auto it = merges_.find(pairKey(word[i], word[i + 1]));
      if (it != merges_.end() && (!best || it->second.rank < best->rank)) {
        best = &it->second;
        bestKey = it->first;
      }
    }
    if (!best) break;
    next.clear();
    for (size_t i = 0; i < word.size();) {
      if (i + 1 < word.size() && pairKey(word[i], word[i + 1]) == bestKey) {
        next.push_back(best->id);
        i += 2;
      } else {
        next.push_back(word[i++]);
      }
    }
    word.swap(next);
  }
  out.insert(out.end(), word.begin(), word.end());
}

std::vector<int32_t> Gpt2Tokenizer::encode(std::string_view text) const {
  std::vector<int32_t> out;
  std::unordered_map<std::string_view, std::pair<size_t, size_t>> cache;  // piece -> out range
  for (std::string_view piece : gpt2Pretokenize(text)) {
    auto it = cache.find(piece);
    if (it != cache.end()) {
      auto [begin, len] = it->second;
      for (size_t i = 0; i < len; ++i) out.push_back(out[begin + i]);
      continue;
    }
    size_t begin = out.size();
    bpe(piece, out);
    cache.emplace(piece, std::make_pair(begin, out.size() - begin));
  }
  return out;
}

std::string Gpt2Tokenizer::decode(std::span<const int32_t> ids) const {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocabSize())
      throw ConfigError(
          fmt::format("tokenizer {}: token id {} at position {} is outside the "
                      "vocabulary [0, {})",
                      describe(), ids[i], i, vocabSize()));
    s += bytesOf_[static_cast<size_t>(ids[i])];
  }
  return s;
}

}  // namespace ds::runtime
