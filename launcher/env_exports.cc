// Export collection and .dsenv parsing (see env_exports.h).
#include "launcher/env_exports.h"

#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <utility>

#include "core/error.h"
#include "launcher/launcher_knobs.h"

namespace ds::launcher {

namespace {
constexpr const char* kPrefixes[] = {"NCCL", "DS_", "OMP_", "UCX", "PYTHON", "MLFLOW", "MV2"};
constexpr const char* kJobVars[] = {"DS_JOB_TOKEN", "DS_JOB_ID"};
constexpr const char* kDsrunEnvFile = ".dsenv";  // dsrun's own name, read after DeepSpeed's

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

bool isJobVar(const std::string& key) {
  for (const char* k : kJobVars)
    if (key == k) return true;
  return false;
}

void requireExportable(const std::string& key, const std::string& where) {
  if (!isValidEnvKey(key))
    throw ConfigError(
        fmt::format("{}: '{}' is not a valid variable name (expected "
                    "[A-Za-z_][A-Za-z0-9_]*)",
                    where, key));
  if (isJobVar(key))
    throw ConfigError(
        fmt::format("{}: {} is set by dsrun for each job and cannot be exported", where, key));
}

bool isFile(const std::string& path, dev_t* dev, ino_t* ino) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  *dev = st.st_dev;
  *ino = st.st_ino;
  return true;
}
}  // namespace

bool isValidEnvKey(const std::string& key) {
  if (key.empty() || (key[0] >= '0' && key[0] <= '9')) return false;
  for (char c : key)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
      return false;
  return true;
}

bool isDefaultExport(const std::string& key) {
  if (isJobVar(key)) return false;
  for (const char* p : kPrefixes)
    if (key.rfind(p, 0) == 0) return true;
  return false;
}

EnvMap parseDsenv(const std::string& text, const std::string& path) {
  EnvMap out;
  std::istringstream in(text);
  std::string raw;
  int lineNo = 0;
  while (std::getline(in, raw)) {
    ++lineNo;
    std::string line = trim(raw);
    if (line.empty() || line[0] == '#') continue;
    if (line.rfind("export ", 0) == 0) line = trim(line.substr(7));
    std::string where = fmt::format("{}:{}", path, lineNo);
    size_t eq = line.find('=');
    if (eq == std::string::npos)
      throw ConfigError(fmt::format("{}: expected KEY=VALUE, got '{}'", where, line));
    std::string key = trim(line.substr(0, eq));
    std::string value = trim(line.substr(eq + 1));
    requireExportable(key, where);
    if (value.size() >= 2 && (value[0] == '"' || value[0] == '\'') && value.back() == value[0])
      value = value.substr(1, value.size() - 2);
    out[key] = value;
  }
  return out;
}

std::vector<std::string> dsenvFiles(const EnvMap& env, const std::string& cwd) {
  auto named = knobString(knobs::kEnvFile, env);
  bool explicitName = named && !named->empty();
  std::string name = explicitName ? *named : std::string(knobs::kEnvFile.dflt);
  std::vector<std::string> names{name};
  if (!explicitName) names.emplace_back(kDsrunEnvFile);
  std::vector<std::string> candidates;
  if (name[0] == '/') {
    candidates.push_back(name);
  } else {
    std::vector<std::string> folders;
    auto home = knobString(knobs::kHome, env);
    if (home && !home->empty()) folders.push_back(*home);
    folders.push_back(cwd);
    for (const auto& folder : folders)
      for (const auto& file : names) candidates.push_back(folder + "/" + file);
  }
  std::vector<std::string> out;
  std::vector<std::pair<dev_t, ino_t>> seen;
  for (const auto& path : candidates) {
    dev_t dev = 0;
    ino_t ino = 0;
    if (!isFile(path, &dev, &ino)) continue;
    if (std::find(seen.begin(), seen.end(), std::make_pair(dev, ino)) != seen.end()) continue;
    seen.emplace_back(dev, ino);
    out.push_back(path);
  }
  if (explicitName && out.empty())
    throw ConfigError(fmt::format("DS_ENV_FILE={}: no such file{}", name,
                                  name[0] == '/' ? "" : " in ~ or the current directory"));
  return out;
}

EnvMap collectExports(const EnvMap& env, const std::vector<std::string>& exportFlags,
                      const std::vector<std::string>& dsenvPaths) {
  EnvMap out;
  for (const auto& [k, v] : env)
    if (isDefaultExport(k)) out[k] = v;
  for (const auto& path : dsenvPaths) {
    std::ifstream in(path);
    if (!in) throw ConfigError(fmt::format("{}: cannot open for reading", path));
    std::stringstream ss;
    ss << in.rdbuf();
    for (auto& [k, v] : parseDsenv(ss.str(), path)) out[k] = v;
  }
  for (const auto& flag : exportFlags) {
    size_t eq = flag.find('=');
    std::string key = flag.substr(0, eq);
    requireExportable(key, fmt::format("--export {}", flag));
    if (eq != std::string::npos) {
      out[key] = flag.substr(eq + 1);
      continue;
    }
    auto it = env.find(key);
    if (it == env.end())
      throw ConfigError(
          fmt::format("--export {}: {} is not set in dsrun's environment (write --export {}=VALUE)",
                      key, key, key));
    out[key] = it->second;
  }
  return out;
}

}  // namespace ds::launcher
