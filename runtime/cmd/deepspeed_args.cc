// DeepSpeed's command-line arguments (see deepspeed_args.h).
#include "runtime/cmd/deepspeed_args.h"

#include <filesystem>

namespace ds::runtime {

void addDeepSpeedArgs(CLI::App& app, DeepSpeedArgs& args) {
  app.add_option("--deepspeed_config", args.config,
                 "a DeepSpeed JSON config file (relative to the current folder), as DeepSpeed's "
                 "flag: same as --set deepspeed_config=<its absolute path>; with the built-in "
                 "plan it replaces the plan's deepspeed block")
      ->type_name("FILE");
  app.add_flag("--deepspeed", args.enabled,
               "accepted for DeepSpeed command lines; DeepSpeed is always on here");
}

void applyDeepSpeedArgs(const DeepSpeedArgs& args, const std::string& planPath,
                        std::vector<std::string>& overrides) {
  if (args.config.empty()) return;
  // A YAML double-quoted scalar, so any path (spaces, colons, quotes) survives as one string.
  const std::string path = std::filesystem::absolute(args.config).lexically_normal().string();
  std::string quoted = "\"";
  for (char c : path) {
    if (c == '"' || c == '\\') quoted += '\\';
    quoted += c;
  }
  quoted += '"';
  overrides.insert(overrides.begin(), "deepspeed_config=" + quoted);
  if (planPath.empty()) overrides.insert(overrides.begin(), "deepspeed=null");
}

}  // namespace ds::runtime
