// --dry_run: the text that describes, per host, the exact command dsrun would run. Built from the
// same builders the runners use, so it cannot drift from what runs. Never contains the token.
#pragma once

#include <string>

#include "core/env.h"
#include "launcher/job_builder.h"

namespace ds::launcher {

// Where openmpi's generated hostfile goes for this job (launcher/temp_hostfile.h).
std::string openMpiHostfilePath(const JobSpec& spec, const EnvMap& env);
// The mpiexec to use for --launcher mpich (first of mpiexec.hydra, mpirun.mpich, mpiexec.mpich,
// else "mpirun").
std::string mpichExecutable(const EnvMap& env);

// One line per rank: how the node agent would start it (argv with --local_rank appended).
std::string rankLines(const JobSpec& spec, int node);

std::string dryRunText(const JobPlan& plan, const std::string& dsrunPath, const EnvMap& env);

}  // namespace ds::launcher
