// The environment dsrun exports to every rank (DESIGN.md §4.3): NCCL*, DS_*, OMP_*, UCX*, PYTHON*
// from dsrun's environment, then `.deepspeed_env`/`.dsenv` in ~ then ., then --export K[=V] (later
// wins). Not the rank contract (RANK, ...: the agent's) and never the job token. Values are data:
// quoting for a remote shell happens where a command line is built (shell_quote.h).
#pragma once

#include <string>
#include <vector>

#include "core/env.h"

namespace ds::launcher {

// [A-Za-z_][A-Za-z0-9_]*
bool isValidEnvKey(const std::string& key);

// True for the prefixes exported by default (not DS_JOB_TOKEN / DS_JOB_ID: set per job).
bool isDefaultExport(const std::string& key);

// `.dsenv`: KEY=VALUE per line (an optional leading `export `), blank lines and `#` comments
// skipped, a value wrapped in matching quotes is unwrapped. Throws ConfigError "path:line: ...".
EnvMap parseDsenv(const std::string& text, const std::string& path);

// ~/.deepspeed_env, ~/.dsenv, ./.deepspeed_env, ./.dsenv (one entry when two are the same file);
// only existing files. DS_ENV_FILE (as in DeepSpeed) names the file instead: a relative name is
// looked up in ~ then ., an absolute one is used alone; when it is set and no such file exists,
// ConfigError.
std::vector<std::string> dsenvFiles(const EnvMap& env, const std::string& cwd);

// Collects the exports. `exportFlags` are the --export values (K or K=V; K alone takes the value
// from `env`). Throws ConfigError naming the flag or file:line on bad input.
EnvMap collectExports(const EnvMap& env, const std::vector<std::string>& exportFlags,
                      const std::vector<std::string>& dsenvPaths);

}  // namespace ds::launcher
