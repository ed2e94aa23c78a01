// --set overrides on the YAML tree; see plan_overrides.h.
#include "runtime/config/plan_overrides.h"

#include <fmt/format.h>

#include "core/error.h"
#include "runtime/config/config_text.h"

namespace ds::runtime {
namespace {

std::vector<std::string> splitPath(const std::string& path, const std::string& text) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    size_t dot = path.find('.', start);
    std::string p = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (p.empty()) throw ConfigError(fmt::format("--set {}: empty key in path '{}'", text, path));
    parts.push_back(p);
    if (dot == std::string::npos) return parts;
    start = dot + 1;
  }
}

}  // namespace

std::set<std::string> applyOverrides(YAML::Node root, const std::vector<std::string>& overrides) {
  std::set<std::string> paths;
  for (const auto& text : overrides) {
    size_t eq = text.find('=');
    if (eq == std::string::npos || eq == 0)
      throw ConfigError(fmt::format("--set {}: expected key.path=value", text));
    std::string path = text.substr(0, eq), value = text.substr(eq + 1);
    auto parts = splitPath(path, text);
    if (value.find_first_not_of(" \t\r\n") == std::string::npos)
      throw ConfigError(fmt::format(
          "--set {}: empty value (give a value; null removes the key so its default applies)",
          text));
    checkUtf8(text, "--set");
    YAML::Node parsed;
    try {
      parsed = YAML::Load(value);
    } catch (const YAML::Exception& e) {
      throw ConfigError(fmt::format("--set {}: value is not valid YAML: {}", text, e.msg));
    }
    checkConfigKeys(parsed, "--set " + path);
    YAML::Node cur = root;
    std::string sofar;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      sofar += (i ? "." : "") + parts[i];
      YAML::Node next = cur[parts[i]];
      if (!next || next.IsNull()) {
        cur[parts[i]] = YAML::Node(YAML::NodeType::Map);
        next = cur[parts[i]];
      } else if (!next.IsMap()) {
        throw ConfigError(fmt::format("--set {}: '{}' is not a map, cannot set '{}' inside it",
                                      text, sofar, path));
      }
      cur.reset(next);
    }
    cur[parts.back()] = parsed;
    paths.insert(path);
  }
  return paths;
}

}  // namespace ds::runtime
