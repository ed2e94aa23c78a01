// CLI11 definition of dsrun's flags (see cli.h).
#include "launcher/cli.h"

#include <CLI/CLI.hpp>

#include <algorithm>

#include "core/error.h"
#include "ds/config.h"
#include "launcher/hostfile.h"
#include "launcher/launcher_knobs.h"

namespace ds::launcher {

namespace {

constexpr const char* kFooter = R"(
The program and its arguments come after dsrun's options and pass through untouched.
`train`, `hello`, `comm-bench`, `prepare-data` and `export-checkpoint` run the dsrt next to this
dsrun.

Examples:
  dsrun --num_gpus 2 train                               2 ranks on this machine
  dsrun -H hosts --num_gpus 8 train plan.yaml            8 ranks per host over ssh
  dsrun -H hosts train.py --deepspeed_config ds.json     a DeepSpeed user's script
  dsrun -H hosts --launcher pdsh train plan.yaml         same, fanned out by pdsh
  dsrun -H hosts --launcher openmpi train plan.yaml      mpirun does the spawning
  dsrun -H hosts -i 'w1:0,1@w2' --dry_run python3 x.py   print the commands, run nothing
  dsrun -H hosts --num_gpus 8 train plan.yaml --check    validate the plan for this world size,
                                                         print the effective config, start nothing

A PROGRAM ending in .py runs as `python3 -u PROGRAM --local_rank=N ARGS`, as under DeepSpeed.
Hostfile lines: `host [slots=N] [max_slots=M] [# comment]`. Exported to every rank: NCCL*, DS_*,
OMP_*, UCX*, PYTHON*, MLFLOW*, MV2*, then ~/ and ./ .deepspeed_env and .dsenv (KEY=VALUE lines),
then --export K[=V].
Exit status: the same for every runner: 0 only when every rank exits 0, else the first failing
rank's code (128+signal when killed), named with its rank and host; the other ranks on every host
are stopped at once (SIGTERM, DS_KILL_GRACE seconds [5], SIGKILL), as they are when dsrun gets
SIGINT/SIGTERM/SIGHUP (status 128+signal) or SIGKILL. Bad input: 2, before any start.
Restarts (--max_restarts N): after a failure the whole job starts again (not after a signal to
dsrun), each rank with DS_RESTART_ATTEMPT=k; dsrun logs each restart with the failing rank, its
host and status, and exits with the last attempt's status.
Environment: `dsrun --help-env` lists every variable dsrun reads, with its default.
Documentation: docs/launcher.md, docs/knobs.md)";

// "--num_nodes,--num-nodes" for every underscore name.
std::string names(const std::string& shortName, const std::string& longName) {
  std::string out = shortName.empty() ? "" : shortName + ",";
  out += "--" + longName;
  std::string dashed = longName;
  std::replace(dashed.begin(), dashed.end(), '_', '-');
  if (dashed != longName) out += ",--" + dashed;
  return out;
}

}  // namespace

int parseCli(const std::vector<std::string>& args, CliOptions* o, std::string* printed) {
  CLI::App app{
      "dsrun [OPTIONS] PROGRAM [ARGS...]: launch PROGRAM on every selected slot of every "
      "host (DeepSpeed-compatible runner flags)",
      "dsrun"};
  app.prefix_command();
  // argparse semantics: a repeated option takes its last value (wrapper scripts append flags).
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.footer(kFooter);
  app.get_formatter()->column_width(34);
  o->hostfile = kDefaultHostfile;

  app.add_option(names("-H", "hostfile"), o->hostfile,
                 "Hostfile (`host slots=N` lines); the default missing means a local run, a "
                 "named file missing is an error")
      ->type_name("FILE")
      ->capture_default_str();
  app.add_option(names("-i", "include"), o->include,
                 "Resources to use: host[:slot,slot]@host...; a bare host keeps all its slots")
      ->type_name("SPEC");
  app.add_option(names("-e", "exclude"), o->exclude,
                 "Resources to drop, same syntax; exclusive with --include")
      ->type_name("SPEC");
  app.add_option(names("", "num_nodes"), o->numNodes, "Use the first N hosts")->type_name("N");
  app.add_option(names("", "num_gpus") + ",--num_accelerators,--num-accelerators", o->numGpus,
                 "Ranks (slots 0..N-1) per host")
      ->type_name("N");
  app.add_option(names("", "master_addr"), o->masterAddr,
                 "Address of node 0 for the rendezvous (default: 127.0.0.1 locally, else the "
                 "first host)")
      ->type_name("ADDR");
  app.add_option(names("", "master_port"), o->masterPort, "Rendezvous port")
      ->type_name("PORT")
      ->capture_default_str();
  app.add_option(names("", "launcher"), o->launcher,
                 "Multi-node runner: ssh (default), pdsh, openmpi, mpich, slurm")
      ->type_name("NAME");
  app.add_option(names("", "launcher_args"), o->launcherArgs,
                 "Extra arguments for pdsh/mpirun/srun, one shell-quoted string")
      ->type_name("ARGS");
  app.add_flag(names("", "no_local_rank"), o->noLocalRank,
               "Do not pass --local_rank=N to the program (it goes right after a Python "
               "script, else after the last argument)");
  app.add_flag(names("", "module"), o->module,
               "Run the program as a Python module: python3 -u -m NAME --local_rank=N ARGS");
  app.add_flag(names("", "no_python"), o->noPython,
               "Execute the program as given (no python3 -u in front of a .py script), with "
               "--local_rank=N right after it");
  app.add_flag(names("", "no_ssh"), o->noSsh,
               "Run only this node's share (with --node_rank), as under Kubernetes");
  app.add_option(names("", "node_rank"), o->nodeRank, "This node's index, with --no_ssh")
      ->type_name("N");
  app.add_flag(names("", "force_multi"), o->forceMulti,
               "Use the multi-node runner even for a single local host");
  app.add_option(names("", "enable_each_rank_log"), o->eachRankLog,
                 "Write each rank's output to DIR/<time>_rank<N>.log instead of the console")
      ->type_name("DIR");
  app.add_flag(names("", "bind_cores_to_rank"), o->bindCoresToRank,
               "Give each local rank its own slice of the cores, set OMP_NUM_THREADS to its size");
  app.add_option(names("", "bind_core_list"), o->bindCoreList,
                 "Cores to share out, e.g. 0,2-5 (implies --bind_cores_to_rank)")
      ->type_name("LIST");
  app.add_option(names("", "ssh_port"), o->sshPort, "ssh port (ssh, pdsh and openmpi runners)")
      ->type_name("PORT");
  app.add_flag(names("", "save_pid"), o->savePid,
               "Each node agent writes its pid to /tmp/<dsrun pid>.dsrun while it runs");
  app.add_option(names("", "export"), o->exports,
                 "Export K=V (or K with dsrun's value) to every rank; repeatable")
      ->type_name("K[=V]")
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option(names("", "comm_backend"), o->commBackend,
                 "Collective backend: gloo, mpi (implies --launcher openmpi), nccl")
      ->type_name("NAME");
  bool noShm = false;
  app.add_flag(names("", "no_shm"), noShm,
               "Keep collectives between ranks of one host off the shared-memory transport "
               "(gloo: loopback TCP; mpi: Open MPI's own): exports DS_COMM_SHM=0 to every rank");
  app.add_option(names("", "max_restarts"), o->maxRestarts,
                 "After a rank fails, stop the job and start it again on the same hosts, up to "
                 "N times; dsrt train resumes from the latest checkpoint. Exit status: the last "
                 "attempt's")
      ->type_name("N")
      ->capture_default_str();
  app.add_flag(names("", "dry_run"), o->dryRun,
               "Print, per host, the exact command that would run, and exit");
  bool helpEnv = false;
  app.add_flag("--help-env", helpEnv, "List the environment variables dsrun reads, and exit");
  app.set_version_flag("--version", std::string("dsrun ") + DS_VERSION);

  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::CallForHelp&) {
    *printed = app.help();
    return 0;
  } catch (const CLI::CallForVersion&) {
    *printed = std::string("dsrun ") + DS_VERSION + "\n";
    return 0;
  } catch (const CLI::ParseError& e) {
    throw ConfigError(fmt::format("{} (see dsrun --help)", e.what()));
  }
  if (helpEnv) {
    *printed = "Environment variables dsrun reads (docs/knobs.md):\n\n" +
               knobsHelpText(kDsrunKnobTables, kReadByDsrun);
    return 0;
  }
  if (noShm) o->exports.emplace_back("DS_COMM_SHM=0");  // after --export: the flag wins
  o->hostfileExplicit = app.count("--hostfile") > 0;
  std::transform(o->launcher.begin(), o->launcher.end(), o->launcher.begin(), ::tolower);
  o->program = app.remaining();
  if (!o->program.empty() && o->program[0] == "--") {
    o->program.erase(o->program.begin());  // after `--` everything is the program
  } else if (!o->program.empty() && o->program[0].size() > 1 && o->program[0][0] == '-') {
    throw ConfigError(
        fmt::format("unknown option '{}' (dsrun's options come before the "
                    "program; see --help)",
                    o->program[0]));
  }
  return -1;
}

}  // namespace ds::launcher
