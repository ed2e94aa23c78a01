// `dsrt check [plan.yaml] [--set k=v ...] [--world_size N]` (and `dsrt train --check`): load and
// validate the plan and its DeepSpeed config for a world size, print the effective config (every
// key, its value and where it came from) and exit 0, or 2 with every problem found. Starts no
// process group and writes nothing.
#pragma once

#include <string>
#include <vector>

namespace ds::runtime {

int checkCommand(int argc, char** argv);

// The check itself: prints to stdout, throws ConfigError (exit 2) when the plan is refused.
int checkPlan(const std::string& plan, const std::vector<std::string>& overrides, int worldSize);

}  // namespace ds::runtime
