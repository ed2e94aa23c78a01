// Strict typed YAML reads; see yaml_reader.h.
#include "runtime/config/yaml_reader.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "core/error.h"

namespace ds::runtime {
namespace {

std::string lower(std::string s) {
  for (auto& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

size_t editDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string show(const YAML::Node& n) {
  if (n.IsScalar()) return n.Scalar();
  if (n.IsSequence()) return "a list";
  if (n.IsMap()) return "a map";
  return "null";
}

bool absent(const YAML::Node& v) { return !v || v.IsNull(); }

// Strict number parse: the whole text must be a number.
bool parseNumber(const std::string& s, double* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(s.c_str(), &end);
  if (*end != '\0' || errno == ERANGE || std::isnan(v)) return false;
  *out = v;
  return true;
}

}  // namespace

bool fromSet(const ReadContext& ctx, const std::string& keyPath) {
  // The key itself or a map above it was given by --set (`--set deepspeed={...}` sets every
  // key inside).
  for (size_t end = keyPath.size(); end != std::string::npos && end > 0;
       end = keyPath.rfind('.', end - 1)) {
    if (ctx.overridden.count(keyPath.substr(0, end))) return true;
  }
  return false;
}

NodeReader::NodeReader(YAML::Node node, std::string path, const ReadContext* ctx)
    : node_(node), path_(std::move(path)), ctx_(ctx) {
  if (node_ && !node_.IsNull() && !node_.IsMap())
    throw ConfigError(fmt::format("{}{}: expected a map, got {}", where(node_, path_),
                                  path_.empty() ? "plan" : path_, show(node_)));
}

std::string NodeReader::keyPath(const std::string& key) const {
  if (key.empty()) return path_;
  return path_.empty() ? key : path_ + "." + key;
}

std::string NodeReader::where(const YAML::Node& n, const std::string& keyPath) const {
  if (fromSet(*ctx_, keyPath)) return "--set ";
  auto m = n.IsDefined() && !n.IsNull() ? n.Mark()
           : node_.IsDefined()          ? node_.Mark()
                                        : YAML::Mark::null_mark();
  if (m.line < 0) return ctx_->source + ": ";
  return fmt::format("{}:{}:{}: ", ctx_->source, m.line + 1, m.column + 1);
}

std::string NodeReader::position(const std::string& key) const {
  if (node_ && node_.IsMap() && !key.empty()) {
    const YAML::Node& c = node_;
    return where(c[key], keyPath(key));
  }
  return where(YAML::Node(YAML::NodeType::Undefined), keyPath(key));
}

void NodeReader::fail(const std::string& key, const std::string& msg) const {
  throw ConfigError(position(key) + keyPath(key) + ": " + msg);
}

void NodeReader::refuse(const std::string& key, const std::string& msg) const {
  if (!ctx_->errors) fail(key, msg);
  ctx_->errors->push_back(position(key) + keyPath(key) + ": " + msg);
}

YAML::Node NodeReader::get(const std::string& key) {
  known_.insert(key);
  if (!node_ || !node_.IsMap()) return YAML::Node();
  const YAML::Node& c = node_;
  YAML::Node v = c[key];
  if (!v || v.IsNull()) return YAML::Node();
  return v;
}

bool NodeReader::has(const std::string& key) const {
  if (!node_ || !node_.IsMap()) return false;
  const YAML::Node& c = node_;
  YAML::Node v = c[key];
  return v && !v.IsNull();
}

int64_t NodeReader::getInt(const std::string& key, int64_t dflt, int64_t lo, int64_t hi) {
  YAML::Node v = get(key);
  if (absent(v)) return dflt;
  double d = 0;
  if (!v.IsScalar() || !parseNumber(v.Scalar(), &d) || d != std::floor(d) || std::fabs(d) > 9e18)
    fail(key, fmt::format("expected an integer, got '{}'", show(v)));
  auto x = static_cast<int64_t>(d);
  if (x < lo || x > hi) {
    if (hi == INT64_MAX) fail(key, fmt::format("must be >= {}, got {}", lo, x));
    fail(key, fmt::format("must be in [{}, {}], got {}", lo, hi, x));
  }
  return x;
}

double NodeReader::getDouble(const std::string& key, double dflt, double lo, double hi) {
  YAML::Node v = get(key);
  if (absent(v)) return dflt;
  double d = 0;
  if (!v.IsScalar() || !parseNumber(v.Scalar(), &d))
    fail(key, fmt::format("expected a number, got '{}'", show(v)));
  if (d < lo || d > hi) {
    if (hi >= 1e308) fail(key, fmt::format("must be >= {}, got {}", lo, d));
    fail(key, fmt::format("must be in [{}, {}], got {}", lo, hi, d));
  }
  return d;
}

bool NodeReader::getBool(const std::string& key, bool dflt) {
  YAML::Node v = get(key);
  if (absent(v)) return dflt;
  std::string s = v.IsScalar() ? lower(v.Scalar()) : "";
  if (s == "true") return true;
  if (s == "false") return false;
  fail(key, fmt::format("expected true or false, got '{}'", show(v)));
}

std::string NodeReader::getString(const std::string& key, const std::string& dflt) {
  YAML::Node v = get(key);
  if (absent(v)) return dflt;
  if (!v.IsScalar()) fail(key, fmt::format("expected a string, got {}", show(v)));
  return v.Scalar();
}

std::string NodeReader::getEnum(const std::string& key, const std::string& dflt,
                                const std::vector<std::string>& allowed, bool caseInsensitive) {
  std::string s = getString(key, dflt);
  for (const auto& a : allowed)
    if (a == s || (caseInsensitive && lower(a) == lower(s))) return a;
  fail(key, fmt::format("expected one of {}, got '{}'", fmt::join(allowed, ", "), s));
}

std::vector<double> NodeReader::getDoubleList(const std::string& key, std::vector<double> dflt,
                                              size_t wantSize) {
  YAML::Node v = get(key);
  if (absent(v)) return dflt;
  if (!v.IsSequence()) fail(key, fmt::format("expected a list of numbers, got '{}'", show(v)));
  std::vector<double> out;
  for (const auto& e : v) {
    double d = 0;
    if (!e.IsScalar() || !parseNumber(e.Scalar(), &d))
      fail(key, fmt::format("expected a list of numbers, got element '{}'", show(e)));
    out.push_back(d);
  }
  if (wantSize && out.size() != wantSize)
    fail(key, fmt::format("expected {} numbers, got {}", wantSize, out.size()));
  return out;
}

std::vector<int64_t> NodeReader::getIntList(const std::string& key, int64_t lo, int64_t hi) {
  YAML::Node v = get(key);
  if (absent(v)) return {};
  if (!v.IsSequence()) fail(key, fmt::format("expected a list of integers, got '{}'", show(v)));
  std::vector<int64_t> out;
  for (const auto& e : v) {
    double d = 0;
    if (!e.IsScalar() || !parseNumber(e.Scalar(), &d) || d != std::floor(d))
      fail(key, fmt::format("expected a list of integers, got element '{}'", show(e)));
    if (d < double(lo) || d > double(hi))
      fail(key, fmt::format("elements must be in [{}, {}], got {}", lo, hi, show(e)));
    out.push_back(int64_t(d));
  }
  return out;
}

std::optional<NodeReader> NodeReader::child(const std::string& key) {
  YAML::Node v = get(key);
  if (absent(v)) return std::nullopt;
  if (!v.IsMap()) fail(key, fmt::format("expected a map, got '{}'", show(v)));
  return NodeReader(v, keyPath(key), ctx_);
}

void NodeReader::accept(const std::string& key) { known_.insert(key); }

void NodeReader::finish() const {
  if (!node_ || !node_.IsMap()) return;
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    std::string k = it->first.as<std::string>();
    if (known_.count(k)) continue;
    std::string hint;
    size_t best = 3;
    for (const auto& c : known_) {
      size_t d = editDistance(k, c);
      if (d < best) best = d, hint = fmt::format(" (did you mean '{}'?)", keyPath(c));
    }
    std::string names;
    for (const auto& c : known_) names += (names.empty() ? "" : ", ") + c;
    std::string line = fmt::format("{}{}: unknown key{}; known keys here: {}",
                                   where(it->first, keyPath(k)), keyPath(k), hint, names);
    if (!ctx_->errors) throw ConfigError(line);
    ctx_->errors->push_back(line);
  }
}

}  // namespace ds::runtime
