// Reading config text into a YAML tree: plan YAML files, DeepSpeed JSON configs and --set values.
// Strict where yaml-cpp is lenient: a key given twice in one map is an error naming both
// positions (yaml-cpp keeps both and lookups silently take the first), keys must be plain
// scalars, and a JSON file must be JSON (checked by a JSON parser first, so a trailing comma or
// a YAML-only form is refused and syntax errors say "invalid JSON" with the line and column).
// Not the schema: the tree is typed and checked by yaml_reader.h's NodeReader.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>

namespace ds::runtime {

enum class ConfigFormat { kYaml, kJson };

// JSON for names ending in ".json" (any case), YAML otherwise.
ConfigFormat configFormatFor(const std::string& path);

// Parses text; `name` prefixes every error ("<name>:<line>:<col>: ..."). Throws ConfigError.
// An empty document is a null node.
YAML::Node loadConfigText(const std::string& text, const std::string& name, ConfigFormat format);

// ConfigError "<name>:L:C: invalid UTF-8 (byte 0x95); config text must be UTF-8" unless text is
// UTF-8 (strings would otherwise fail later, when the resolved config is written as JSON).
void checkUtf8(const std::string& text, const std::string& name);

// Every map in the tree (once per node, aliases included): ConfigError when a key is not a plain
// scalar or when two keys are equal ("<name>:L:C: key 'k' given twice (first at L:C)", both
// positions in the same text).
void checkConfigKeys(const YAML::Node& root, const std::string& name);

// A config file's text: refuses what is not a regular file (a fifo or /dev/zero would block or
// never end) and files over 64 MiB; `what` names the file's role in errors.
std::string readConfigFile(const std::string& path, const std::string& what);

}  // namespace ds::runtime
