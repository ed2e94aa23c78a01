// ssh_config HostName lookup (see ssh_alias.h).
#include "launcher/ssh_alias.h"

#include <fnmatch.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

#include "launcher/launcher_knobs.h"

namespace ds::launcher {

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// "Key value", "Key=value" or "Key = value" -> {lower(key), words of value}.
bool splitLine(const std::string& raw, std::string* key, std::vector<std::string>* words) {
  std::string line = raw.substr(0, raw.find('#'));
  for (char& c : line)
    if (c == '\t' || c == '\r') c = ' ';
  size_t k = line.find_first_not_of(' ');
  if (k == std::string::npos) return false;
  size_t end = line.find_first_of(" =", k);
  *key = lower(line.substr(k, end == std::string::npos ? std::string::npos : end - k));
  std::string rest = end == std::string::npos ? "" : line.substr(end);
  size_t eq = rest.find_first_not_of(' ');
  if (eq != std::string::npos && rest[eq] == '=') rest = rest.substr(eq + 1);
  std::istringstream in(rest);
  words->clear();
  for (std::string w; in >> w;) {
    if (w.size() >= 2 && w.front() == '"' && w.back() == '"') w = w.substr(1, w.size() - 2);
    words->push_back(w);
  }
  return true;
}

bool hostMatches(const std::vector<std::string>& patterns, const std::string& alias) {
  bool any = false;
  for (const auto& p : patterns) {
    bool negate = !p.empty() && p[0] == '!';
    std::string pat = lower(negate ? p.substr(1) : p);
    if (::fnmatch(pat.c_str(), lower(alias).c_str(), 0) != 0) continue;
    if (negate) return false;
    any = true;
  }
  return any;
}

}  // namespace

std::optional<std::string> sshHostNameIn(const std::string& configText, const std::string& alias) {
  std::istringstream in(configText);
  bool active = true;  // lines before the first Host/Match apply to every host
  std::string key;
  std::vector<std::string> words;
  for (std::string raw; std::getline(in, raw);) {
    if (!splitLine(raw, &key, &words)) continue;
    if (key == "host") {
      active = hostMatches(words, alias);
    } else if (key == "match") {
      active = false;
    } else if (key == "hostname" && active && !words.empty()) {
      std::string name;
      for (size_t i = 0; i < words[0].size(); ++i) {
        if (words[0][i] == '%' && i + 1 < words[0].size() && words[0][i + 1] == 'h') {
          name += alias;
          ++i;
        } else {
          name += words[0][i];
        }
      }
      return name;
    }
  }
  return std::nullopt;
}

std::vector<std::string> sshConfigFiles(const EnvMap& env) {
  if (auto f = knobString(knobs::kSshConfig, env); f && !f->empty()) return {*f};
  std::vector<std::string> out;
  if (auto home = knobString(knobs::kHome, env); home && !home->empty())
    out.push_back(*home + "/.ssh/config");
  out.push_back("/etc/ssh/ssh_config");
  return out;
}

std::optional<std::string> sshHostName(const std::string& alias, const EnvMap& env) {
  for (const auto& path : sshConfigFiles(env)) {
    std::ifstream in(path);
    if (!in) continue;
    std::stringstream text;
    text << in.rdbuf();
    if (auto name = sshHostNameIn(text.str(), alias)) return name;
  }
  return std::nullopt;
}

}  // namespace ds::launcher
