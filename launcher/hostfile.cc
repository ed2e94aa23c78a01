// Hostfile parser (see hostfile.h).
#include "launcher/hostfile.h"

#include <sys/stat.h>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace ds::launcher {

namespace {

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

bool isHostChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

bool validName(const std::string& s) {
  if (s.empty() || s[0] == '-') return false;
  for (char c : s)
    if (!isHostChar(c)) return false;
  return true;
}

[[noreturn]] void bad(const std::string& path, int line, const std::string& text,
                      const std::string& why) {
  throw ConfigError(fmt::format("{}:{}: bad hostfile entry '{}': {}", path, line, text, why));
}

int parseCount(const std::string& value, const std::string& key, const std::string& path, int line,
               const std::string& text) {
  if (value.empty() || value.size() > 6 ||
      value.find_first_not_of("0123456789") != std::string::npos)
    bad(path, line, text, fmt::format("{} must be a non-negative integer, got '{}'", key, value));
  return std::stoi(value);
}

}  // namespace

bool isValidHostToken(const std::string& host) {
  size_t at = host.find('@');
  if (at == std::string::npos) return validName(host);
  if (host.find('@', at + 1) != std::string::npos) return false;
  return validName(host.substr(0, at)) && validName(host.substr(at + 1));
}

const HostfileEntry* Hostfile::find(const std::string& host) const {
  for (const auto& h : hosts)
    if (h.host == host) return &h;
  return nullptr;
}

Hostfile parseHostfile(const std::string& text, const std::string& path) {
  Hostfile hf;
  hf.path = path;
  std::istringstream in(text);
  std::string raw;
  int lineNo = 0;
  while (std::getline(in, raw)) {
    ++lineNo;
    std::string line = trim(raw);
    size_t hash = line.find('#');
    std::string body = trim(hash == std::string::npos ? line : line.substr(0, hash));
    if (body.empty()) continue;
    std::istringstream words(body);
    HostfileEntry e;
    e.line = lineNo;
    words >> e.host;
    if (!isValidHostToken(e.host))
      bad(path, lineNo, line,
          fmt::format("host '{}' is not a valid host name (letters, digits, '.', '_', '-', an "
                      "optional user@ prefix; no leading '-')",
                      e.host));
    bool sawSlots = false, sawMax = false;
    std::string word;
    while (words >> word) {
      size_t eq = word.find('=');
      if (eq == std::string::npos)
        bad(path, lineNo, line,
            fmt::format("expected key=value after the host, got '{}' (write slots=N, no spaces "
                        "around '=')",
                        word));
      std::string key = word.substr(0, eq), value = word.substr(eq + 1);
      if (key == "slots") {
        if (sawSlots) bad(path, lineNo, line, "slots given twice");
        e.slots = parseCount(value, key, path, lineNo, line);
        sawSlots = true;
      } else if (key == "max_slots" || key == "max-slots") {
        if (sawMax) bad(path, lineNo, line, "max_slots given twice");
        e.maxSlots = parseCount(value, key, path, lineNo, line);
        sawMax = true;
      } else {
        bad(path, lineNo, line,
            fmt::format("unknown key '{}' (expected slots=N or max_slots=M)", key));
      }
    }
    if (sawMax && e.maxSlots < e.slots)
      bad(path, lineNo, line,
          fmt::format("max_slots={} is less than slots={}", e.maxSlots, e.slots));
    if (const HostfileEntry* prev = hf.find(e.host))
      bad(path, lineNo, line,
          fmt::format("Hostfile contains multiple entries for {} (first on line {})", e.host,
                      prev->line));
    hf.hosts.push_back(std::move(e));
  }
  if (hf.hosts.empty())
    throw ConfigError(
        fmt::format("{}: hostfile is empty (no host lines, only blanks or comments); write one "
                    "`host slots=N` line per host",
                    path));
  return hf;
}

std::optional<Hostfile> loadHostfile(const std::string& path, bool isExplicit) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT && !isExplicit) return std::nullopt;
    throw ConfigError(fmt::format("--hostfile {}: {}", path, std::strerror(errno)));
  }
  if (S_ISDIR(st.st_mode))
    throw ConfigError(fmt::format("--hostfile {}: is a directory, expected a file", path));
  std::ifstream in(path);
  if (!in) throw ConfigError(fmt::format("--hostfile {}: cannot open for reading", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return parseHostfile(ss.str(), path);
}

}  // namespace ds::launcher
