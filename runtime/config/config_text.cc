// Strict config text reading; see config_text.h.
#include "runtime/config/config_text.h"

#include <sys/stat.h>

#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace ds::runtime {
namespace {

constexpr size_t kMaxConfigBytes = size_t(64) << 20;

std::string at(const YAML::Mark& m) { return fmt::format("{}:{}", m.line + 1, m.column + 1); }

const char* kindName(const YAML::Node& n) {
  if (n.IsMap()) return "a map";
  if (n.IsSequence()) return "a list";
  return "null";
}

// Line and column (1-based) of a byte offset, as nlohmann reports byte positions.
std::pair<size_t, size_t> lineColumn(const std::string& text, size_t offset) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return {line, col};
}

void checkJsonSyntax(const std::string& text, const std::string& name) {
  try {
    const auto parsed = nlohmann::json::parse(text);
    (void)parsed;
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte is one past the offending character; the message says what was expected.
    auto [line, col] = lineColumn(text, e.byte > 0 ? e.byte - 1 : 0);
    // "[json.exception.parse_error.101] parse error at line 1, column 9: syntax error while
    // parsing object - unexpected ..." -> the part after the position.
    std::string msg = e.what();
    const auto at = msg.find(", column ");
    const auto colon = at == std::string::npos ? at : msg.find(": ", at);
    if (colon != std::string::npos) msg = msg.substr(colon + 2);
    throw ConfigError(fmt::format("{}:{}:{}: invalid JSON: {}", name, line, col, msg));
  } catch (const nlohmann::json::exception& e) {  // a number too large for a double
    std::string msg = e.what();
    const auto cut = msg.find("] ");
    if (cut != std::string::npos) msg = msg.substr(cut + 2);
    throw ConfigError(fmt::format("{}: invalid JSON: {}", name, msg));
  }
}

class KeyChecker {
 public:
  explicit KeyChecker(const std::string& name) : name_(name) {}

  void walk(const YAML::Node& n) {
    if (!n.IsDefined() || (!n.IsMap() && !n.IsSequence())) return;
    // An alias repeats its anchor's node: visit each node once (marks are unique per node and
    // kind), so a document of nested aliases stays linear.
    const YAML::Mark m = n.Mark();
    if (!seen_.insert({m.pos, m.line, m.column, n.IsMap()}).second) return;
    if (n.IsSequence()) {
      for (const auto& e : n) walk(e);
      return;
    }
    std::map<std::string, YAML::Mark> keys;
    for (auto it = n.begin(); it != n.end(); ++it) {
      const YAML::Node k = it->first, v = it->second;
      if (!k.IsScalar())
        throw ConfigError(fmt::format("{}:{}: keys must be plain names, got {}", name_,
                                      at(k.Mark()), kindName(k)));
      auto [pos, fresh] = keys.emplace(k.Scalar(), k.Mark());
      if (!fresh)
        throw ConfigError(fmt::format("{}:{}: key '{}' given twice (first at {})", name_,
                                      at(k.Mark()), k.Scalar(), at(pos->second)));
      walk(v);
    }
  }

 private:
  const std::string& name_;
  std::set<std::tuple<int, int, int, bool>> seen_;
};

}  // namespace

void checkUtf8(const std::string& text, const std::string& name) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    size_t len = c < 0x80           ? 1
                 : (c >> 5) == 0x6  ? 2
                 : (c >> 4) == 0xe  ? 3
                 : (c >> 3) == 0x1e ? 4
                                    : 0;
    bool ok = len > 0 && i + len <= text.size();
    uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1fu) : len == 3 ? (c & 0x0fu) : (c & 0x07u);
    for (size_t k = 1; ok && k < len; ++k) {
      const auto d = static_cast<unsigned char>(text[i + k]);
      ok = (d >> 6) == 0x2;
      cp = (cp << 6) | (d & 0x3fu);
    }
    // Overlong forms, surrogates and values past U+10FFFF are not UTF-8 either.
    ok = ok && !(len == 2 && cp < 0x80) && !(len == 3 && cp < 0x800) &&
         !(len == 4 && (cp < 0x10000 || cp > 0x10ffff)) && !(cp >= 0xd800 && cp <= 0xdfff);
    if (!ok)
      throw ConfigError(
          fmt::format("{}:{}:{}: invalid UTF-8 (byte 0x{:02x}); config text must be "
                      "UTF-8",
                      name, line, col, c));
    if (c == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
    i += len;
  }
}

ConfigFormat configFormatFor(const std::string& path) {
  if (path.size() < 5) return ConfigFormat::kYaml;
  std::string ext = path.substr(path.size() - 5);
  for (auto& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext == ".json" ? ConfigFormat::kJson : ConfigFormat::kYaml;
}

void checkConfigKeys(const YAML::Node& root, const std::string& name) {
  KeyChecker(name).walk(root);
}

YAML::Node loadConfigText(const std::string& text, const std::string& name, ConfigFormat format) {
  const char* what = format == ConfigFormat::kJson ? "JSON" : "YAML";
  checkUtf8(text, name);
  if (format == ConfigFormat::kJson) checkJsonSyntax(text, name);
  YAML::Node n;
  try {
    n = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw ConfigError(fmt::format("{}:{}:{}: invalid {}: {}", name, e.mark.line + 1,
                                  e.mark.column + 1, what, e.msg));
  }
  checkConfigKeys(n, name);
  return n;
}

std::string readConfigFile(const std::string& path, const std::string& what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw ConfigError(fmt::format("{}: cannot read '{}': {}", what, path, std::strerror(errno)));
  if (!S_ISREG(st.st_mode))
    throw ConfigError(fmt::format("{}: '{}' is not a regular file", what, path));
  if (size_t(st.st_size) > kMaxConfigBytes)
    throw ConfigError(fmt::format("{}: '{}' is {} bytes; a config file may have at most {}", what,
                                  path, st.st_size, kMaxConfigBytes));
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw ConfigError(fmt::format("{}: cannot read '{}': {}", what, path, std::strerror(errno)));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw ConfigError(fmt::format("{}: cannot read '{}'", what, path));
  return text;
}

}  // namespace ds::runtime
