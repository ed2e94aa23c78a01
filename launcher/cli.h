// dsrun's command line (CLI11): DeepSpeed's runner flags in dash and underscore spellings, plus
// --export, --comm_backend, --dry_run, --version. Parsing stops at the program: it and its
// arguments pass through untouched. Not validation across flags (job_builder.h does that).
#pragma once

#include <string>
#include <vector>

namespace ds::launcher {

struct CliOptions {
  std::string hostfile;           // default kDefaultHostfile
  bool hostfileExplicit = false;  // -H given: a missing file is an error
  std::string include;
  std::string exclude;
  int numNodes = -1;
  int numGpus = -1;
  std::string masterAddr;  // empty = derive
  int masterPort = 29500;
  std::string launcher;  // empty = default (ssh for several hosts); lower-cased
  std::string launcherArgs;
  bool noLocalRank = false;
  bool module = false;    // --module: run the program as `python3 -u -m NAME`
  bool noPython = false;  // --no_python: execute a .py program as given
  bool noSsh = false;
  int nodeRank = -1;
  bool forceMulti = false;
  std::string eachRankLog;  // "" or "None" = off
  bool bindCoresToRank = false;
  std::string bindCoreList;
  int sshPort = 0;
  bool savePid = false;
  std::vector<std::string> exports;  // --export K[=V], repeatable
  std::string commBackend;           // gloo | mpi | nccl, "" = rank decides
  bool dryRun = false;
  int maxRestarts = 0;               // --max_restarts: restart the job after a failure
  std::vector<std::string> program;  // program and its arguments, untouched
};

// Parses args (args[0] = program name). Returns -1 when the job should run, else the exit status
// after --help/--help-env/--version printed their text into *printed. Throws ConfigError on a bad
// flag.
int parseCli(const std::vector<std::string>& args, CliOptions* out, std::string* printed);

}  // namespace ds::launcher
