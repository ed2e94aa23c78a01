// NodeReader: strict, typed reads from one YAML map (a plan block or a ds_config block). Every
// read marks its key as known; finish() rejects any key nobody read. Errors are ConfigErrors
// "<file>:<line>:<col>: <key.path>: <what was expected>, got '<text>'" (the position is left out
// for values that came from --set, which are named as such). Not the schema (plan_schema.cc).
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace ds::runtime {

struct ReadContext {
  std::string source;                // file name for positions ("<built-in default plan>")
  std::set<std::string> overridden;  // key paths set by --set
  // When set, refuse() and finish() add their errors here instead of throwing, so one run lists
  // every refused or unknown key (the ds_config block; the caller throws them together).
  std::vector<std::string>* errors = nullptr;
};

// True when keyPath, or a map above it, was set by --set (its errors then name --set, not the
// plan file: the value has no position there).
bool fromSet(const ReadContext& ctx, const std::string& keyPath);

class NodeReader {
 public:
  // node must be a map (or null, read as empty). ctx must outlive the reader.
  NodeReader(YAML::Node node, std::string path, const ReadContext* ctx);

  bool has(const std::string& key) const;  // present and not null
  int64_t getInt(const std::string& key, int64_t dflt, int64_t lo = INT64_MIN,
                 int64_t hi = INT64_MAX);
  double getDouble(const std::string& key, double dflt, double lo = -1e308, double hi = 1e308);
  bool getBool(const std::string& key, bool dflt);
  std::string getString(const std::string& key, const std::string& dflt);
  // One of `allowed`, compared case-insensitively when asked; returns the allowed spelling.
  std::string getEnum(const std::string& key, const std::string& dflt,
                      const std::vector<std::string>& allowed, bool caseInsensitive = false);
  std::vector<double> getDoubleList(const std::string& key, std::vector<double> dflt,
                                    size_t wantSize = 0);
  std::vector<int64_t> getIntList(const std::string& key, int64_t lo, int64_t hi);
  std::optional<NodeReader> child(const std::string& key);  // a map, when present
  void accept(const std::string& key);                      // known but unused: any value
  // Rejects unknown keys (with a "did you mean" hint when one is close).
  void finish() const;

  std::string keyPath(const std::string& key) const;
  [[noreturn]] void fail(const std::string& key, const std::string& msg) const;
  // A refused key or value: collected when the context collects errors, else thrown as fail().
  void refuse(const std::string& key, const std::string& msg) const;
  // "<file>:<line>:<col>: " (or "--set ") for key of this map, as error lines begin.
  std::string position(const std::string& key) const;
  const std::string& path() const { return path_; }

 private:
  YAML::Node get(const std::string& key);
  std::string where(const YAML::Node& n, const std::string& keyPath) const;

  YAML::Node node_;
  std::string path_;
  const ReadContext* ctx_;
  std::set<std::string> known_;
};

}  // namespace ds::runtime
