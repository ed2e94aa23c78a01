// Turns parsed flags into a JobSpec: hostfile, resource selection, runner choice, master address,
// job id/token, program resolution, exports, per-rank options. Starts nothing; reads only local
// files (hostfile, .dsenv) and /dev/urandom. Every inconsistency is a ConfigError here, before
// anything runs.
#pragma once

#include <string>
#include <vector>

#include "core/env.h"
#include "launcher/cli.h"
#include "launcher/job_spec.h"

namespace ds::launcher {

// dsrt subcommands that resolve to the dsrt binary next to dsrun.
bool isDsrtCommand(const std::string& name);
// program[0] = <dsrunDir>/dsrt when it is a dsrt command; otherwise unchanged.
std::vector<std::string> resolveProgram(const std::vector<std::string>& program,
                                        const std::string& dsrunDir);

// "0,2-5": ascending, non-overlapping; throws ConfigError "--bind_core_list: Bad range ...".
std::vector<int> parseCoreList(const std::string& text);

struct BuildContext {
  EnvMap env;             // dsrun's environment
  std::string cwd;        // dsrun's working directory (absolute)
  std::string dsrunPath;  // absolute path of this dsrun (remote hosts run the same path)
  int pid = 0;            // dsrun's pid (for --save_pid)
  int gpuCount = 0;       // GPUs on this machine
};

struct JobPlan {
  JobSpec spec;
  int nodeRank = 0;  // the node this process runs (local and --no_ssh)
  bool noSsh = false;
  bool hostfileGiven = false;
  std::vector<std::string> notices;  // informational lines for stderr
};

JobPlan buildJobPlan(const CliOptions& opts, const BuildContext& ctx);

}  // namespace ds::launcher
