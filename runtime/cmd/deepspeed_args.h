// DeepSpeed's own command-line arguments on `dsrt train` and `dsrt check`, so that a DeepSpeed
// command line (`... --deepspeed --deepspeed_config ds.json`) runs unchanged:
//   --deepspeed_config FILE  the DeepSpeed JSON config, relative to the current folder (as in
//                            DeepSpeed), i.e. the override `deepspeed_config=<absolute FILE>`,
//                            placed first so that `--set deepspeed.*` still applies on top. With
//                            the built-in plan, its deepspeed block gives way to the file; a plan
//                            file with a `deepspeed:` block of its own is refused by the loader.
//   --deepspeed              accepted; DeepSpeed is always on here.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace ds::runtime {

struct DeepSpeedArgs {
  std::string config;    // --deepspeed_config
  bool enabled = false;  // --deepspeed (no effect)
};

void addDeepSpeedArgs(CLI::App& app, DeepSpeedArgs& args);

// Adds the overrides that `args` stands for to the front of `overrides`; `planPath` empty means
// the built-in plan.
void applyDeepSpeedArgs(const DeepSpeedArgs& args, const std::string& planPath,
                        std::vector<std::string>& overrides);

}  // namespace ds::runtime
