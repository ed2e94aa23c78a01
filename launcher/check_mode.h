// `dsrun ... train [plan] --check`: validate the plan for the world size this launch would have
// and print the effective config, by running the local `dsrt check --world_size W` in place of
// the job (no host is contacted, no rank started, nothing written). Not the check itself
// (runtime/cmd/check_command.h).
#pragma once

#include <string>
#include <vector>

#include "launcher/job_spec.h"

namespace ds::launcher {

// Whether program is `train ... --check` (a dsrt train with --check among its arguments).
bool isTrainCheck(const std::vector<std::string>& program);

// The dsrt check command line for spec (spec.program[0] is the resolved dsrt).
std::vector<std::string> trainCheckArgv(const JobSpec& spec);

// Replaces this process with that command (its exit status is dsrun's); throws SystemError.
[[noreturn]] void execTrainCheck(const JobSpec& spec);

}  // namespace ds::launcher
