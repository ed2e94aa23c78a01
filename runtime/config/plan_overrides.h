// `--set key.path=value` overrides applied to the parsed YAML tree before validation. The value
// is parsed as YAML (so 3, 1e-3, true, [0.9, 0.95] and strings all work) and typed later by the
// schema; an unknown path is then reported by the schema as an unknown key "(from --set)".
#pragma once

#include <yaml-cpp/yaml.h>

#include <set>
#include <string>
#include <vector>

namespace ds::runtime {

// Applies each override to root (creating maps on the way); returns the key paths set.
// ConfigError for malformed text ("expected key.path=value"), an empty value (`key=`: write null
// to remove a key), a key given twice inside the value, or a path through a non-map.
std::set<std::string> applyOverrides(YAML::Node root, const std::vector<std::string>& overrides);

}  // namespace ds::runtime
