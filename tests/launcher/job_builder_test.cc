// Flags -> JobSpec: the CLI (dash and underscore spellings, program passed through untouched),
// hostfile/default-hostfile handling, runner choice, master address, per-job values, and the
// --dry_run text for every runner (per host, the exact command; never the token).
#include <catch2/catch.hpp>

#include "core/error.h"
#include "launcher/cli.h"
#include "launcher/dry_run.h"
#include "launcher/job_builder.h"
#include "launcher/job_spec_codec.h"
#include "launcher/runner_commands.h"
#include "tests/support/spawn_ranks.h"

using namespace ds::launcher;
using Catch::Matchers::Contains;

namespace {

struct Fixture {
  ds::test::TempDir dir;
  ds::EnvMap env;
  Fixture() {
    env = {{"HOME", dir.path()}, {"PATH", "/usr/bin:/bin"}, {"NCCL_DEBUG", "INFO"}};
    ds::test::writeFile(dir.file("two"), "127.0.0.2 slots=2\n127.0.0.3 slots=2\n");
    ds::test::writeFile(dir.file("one_remote"), "127.0.0.2 slots=2\n");
    ds::test::writeFile(dir.file("one_local"), "localhost slots=3\n");
  }

  CliOptions cli(std::vector<std::string> args) {
    args.insert(args.begin(), "dsrun");
    CliOptions o;
    std::string printed;
    REQUIRE(parseCli(args, &o, &printed) == -1);
    if (!o.hostfileExplicit) o.hostfile = dir.file("no-default-hostfile");
    return o;
  }

  BuildContext ctx() const { return BuildContext{env, dir.path(), "/opt/ds/bin/dsrun", 4242, 0}; }

  JobPlan plan(const std::vector<std::string>& args) { return buildJobPlan(cli(args), ctx()); }

  std::string planError(const std::vector<std::string>& args) {
    try {
      plan(args);
    } catch (const ds::ConfigError& e) {
      return e.what();
    }
    return "";
  }

  std::string dryRun(const std::vector<std::string>& args) {
    JobPlan p = plan(args);
    std::string text = dryRunText(p, "/opt/ds/bin/dsrun", env);
    INFO(text);
    if (!p.spec.jobToken.empty()) CHECK(text.find(p.spec.jobToken) == std::string::npos);
    return text;
  }
};

bool contains(const std::string& hay, const std::string& needle) {
  return hay.find(needle) != std::string::npos;
}

}  // namespace

TEST_CASE("cli: dash and underscore spellings, program passed through untouched", "[unit]") {
  Fixture f;
  CliOptions a = f.cli({"--num_gpus", "2", "--master-port=29600", "--no-local-rank", "--launcher",
                        "PDSH", "--export", "A=1", "--export=B", "-i", "h:0", "python3", "x.py",
                        "--num_gpus", "9", "--help", "-H", "x"});
  CHECK(a.numGpus == 2);
  CHECK(a.masterPort == 29600);
  CHECK(a.noLocalRank);
  CHECK(a.launcher == "pdsh");
  CHECK(a.exports == std::vector<std::string>{"A=1", "B"});
  CHECK(a.include == "h:0");
  CHECK(a.program ==
        std::vector<std::string>{"python3", "x.py", "--num_gpus", "9", "--help", "-H", "x"});
  CliOptions b = f.cli({"--num-accelerators=3",
                        "--num_nodes=1",
                        "--no_ssh",
                        "--node-rank",
                        "0",
                        "--force-multi",
                        "--bind_cores_to_rank",
                        "--bind-core-list",
                        "0-1",
                        "--ssh-port",
                        "2222",
                        "--save-pid",
                        "--comm-backend",
                        "gloo",
                        "--dry-run",
                        "--enable-each-rank-log",
                        "logs",
                        "--master-addr",
                        "1.2.3.4",
                        "--launcher-args",
                        "-x y",
                        "-e",
                        "h",
                        "prog"});
  CHECK(b.numGpus == 3);
  CHECK(b.numNodes == 1);
  CHECK(b.noSsh);
  CHECK(b.nodeRank == 0);
  CHECK(b.forceMulti);
  CHECK(b.bindCoresToRank);
  CHECK(b.bindCoreList == "0-1");
  CHECK(b.sshPort == 2222);
  CHECK(b.savePid);
  CHECK(b.commBackend == "gloo");
  CHECK(b.dryRun);
  CHECK(b.eachRankLog == "logs");
  CHECK(b.masterAddr == "1.2.3.4");
  CHECK(b.launcherArgs == "-x y");
  CHECK(b.exclude == "h");
  CHECK(b.program == std::vector<std::string>{"prog"});
}

TEST_CASE("cli: `--` ends the options, a repeated option takes its last value", "[unit]") {
  Fixture f;
  CliOptions a = f.cli({"--num_gpus", "2", "--num_gpus", "3", "--", "--weird-program", "--", "x"});
  CHECK(a.numGpus == 3);
  CHECK(a.program == std::vector<std::string>{"--weird-program", "--", "x"});
  CHECK(f.plan({"--", "./prog"}).spec.program == std::vector<std::string>{"./prog"});
}

TEST_CASE("cli: --help, --version and bad flags", "[unit]") {
  CliOptions o;
  std::string printed;
  CHECK(parseCli({"dsrun", "--version"}, &o, &printed) == 0);
  CHECK_THAT(printed, Contains("dsrun "));
  CHECK(parseCli({"dsrun", "--help"}, &o, &printed) == 0);
  CHECK_THAT(printed, Contains("--num_gpus"));
  CHECK_THROWS_AS(parseCli({"dsrun", "--num_gpus", "two", "x"}, &o, &printed), ds::ConfigError);
  CHECK_THROWS_AS(parseCli({"dsrun", "--master_port"}, &o, &printed), ds::ConfigError);
  Fixture f;
  CHECK_THROWS_WITH(parseCli({"dsrun", "--bogus", "x"}, &o, &printed),
                    Contains("unknown option '--bogus' (dsrun's options come before the program"));
  CHECK_THAT(f.planError({}), Contains("no program given"));
}

TEST_CASE("job: the default hostfile missing means one local host", "[unit]") {
  Fixture f;
  JobPlan p = f.plan({"--num_gpus", "2", "train", "plan.yaml"});
  CHECK_FALSE(p.hostfileGiven);
  CHECK(p.spec.runner == RunnerKind::kLocal);
  REQUIRE(p.spec.hosts.size() == 1);
  CHECK(p.spec.hosts[0].host == "localhost");
  CHECK(p.spec.hosts[0].slots == std::vector<int>{0, 1});
  CHECK(p.spec.masterAddr == "127.0.0.1");
  CHECK(p.spec.program == std::vector<std::string>{"/opt/ds/bin/dsrt", "train", "plan.yaml"});
  CHECK(p.spec.exports.at("NCCL_DEBUG") == "INFO");
  CHECK(p.spec.exports.count("PYTHONPATH") == 0);  // local ranks inherit dsrun's environment
  CHECK(p.spec.cwd == f.dir.path());
  CHECK(p.spec.jobToken.size() == 32);
  CHECK(p.spec.jobId.rfind("dsrun-", 0) == 0);
  CHECK(f.plan({"hello"}).spec.hosts[0].slots.size() == 1);          // CPU: one rank by default
  CHECK(f.plan({"python3", "train"}).spec.program[0] == "python3");  // only argv[0] resolves
  CHECK_THAT(f.planError({"--num_nodes", "2", "x"}),
             Contains("Num nodes is >1 but no extra nodes available via hostfile"));
}

TEST_CASE("job: a missing explicit hostfile is an error", "[unit]") {
  Fixture f;
  CHECK_THAT(f.planError({"-H", f.dir.file("missing"), "x"}),
             Contains("--hostfile " + f.dir.file("missing") + ": No such file"));
  ds::test::writeFile(f.dir.file("dup"), "a slots=1\na slots=1\n");
  CHECK_THAT(f.planError({"--hostfile", f.dir.file("dup"), "x"}),
             Contains(f.dir.file("dup") + ":2:"));
}

TEST_CASE("job: runner choice", "[unit]") {
  Fixture f;
  std::string two = f.dir.file("two");
  CHECK(f.plan({"-H", two, "x"}).spec.runner == RunnerKind::kSsh);
  CHECK(f.plan({"-H", two, "--launcher", "pdsh", "x"}).spec.runner == RunnerKind::kPdsh);
  CHECK(f.plan({"-H", two, "--launcher", "openmpi", "x"}).spec.runner == RunnerKind::kOpenMpi);
  CHECK(f.plan({"-H", two, "--launcher", "mpich", "x"}).spec.runner == RunnerKind::kMpich);
  CHECK(f.plan({"-H", two, "--launcher", "slurm", "x"}).spec.runner == RunnerKind::kSlurm);
  // One remote host runs remotely (DeepSpeed ran it locally, issue #713).
  CHECK(f.plan({"-H", f.dir.file("one_remote"), "x"}).spec.runner == RunnerKind::kSsh);
  CHECK(f.plan({"-H", f.dir.file("one_local"), "x"}).spec.runner == RunnerKind::kLocal);
  CHECK(f.plan({"-H", f.dir.file("one_local"), "--force_multi", "x"}).spec.runner ==
        RunnerKind::kSsh);
  // --comm_backend mpi alone implies the openmpi runner, also for a local run.
  JobPlan mpi = f.plan({"--comm_backend", "mpi", "--num_gpus", "4", "x"});
  CHECK(mpi.spec.runner == RunnerKind::kOpenMpi);
  CHECK(mpi.spec.commBackend == "mpi");
  CHECK_THAT(f.planError({"--comm_backend", "mpi", "--launcher", "pdsh", "-H", two, "x"}),
             Contains("--comm_backend mpi needs ranks started by mpirun or srun"));
  CHECK_THAT(f.planError({"--comm_backend", "mpi", "--no_ssh", "--node_rank", "0", "x"}),
             Contains("but --no_ssh starts them itself"));
  CHECK_THAT(f.planError({"--launcher", "slurm", "--no_ssh", "--node_rank", "0", "x"}),
             Contains("cannot be combined with --launcher slurm"));
  CHECK_THAT(f.planError({"--launcher", "torque", "x"}),
             Contains("--launcher: unknown launcher 'torque' (expected one of ssh, pdsh, "
                      "openmpi, mpich, slurm)"));
  CHECK_THAT(f.planError({"--comm_backend", "ucc", "x"}),
             Contains("--comm_backend: unknown backend 'ucc'"));
}

TEST_CASE("job: selection flags reach the resource filter", "[unit]") {
  Fixture f;
  std::string two = f.dir.file("two");
  auto p = f.plan({"-H", two, "-i", "127.0.0.3:1", "x"});
  REQUIRE(p.spec.hosts.size() == 1);
  CHECK(p.spec.hosts[0].host == "127.0.0.3");
  CHECK(p.spec.hosts[0].slots == std::vector<int>{1});
  CHECK(p.spec.masterAddr == "127.0.0.3");
  CHECK_THAT(f.planError({"-H", two, "-i", "127.0.0.9", "x"}),
             Contains("Hostname '127.0.0.9' not found in hostfile " + two));
  CHECK_THAT(f.planError({"-H", two, "-i", "127.0.0.2:5", "x"}),
             Contains("No slot '5' specified on host '127.0.0.2'"));
  CHECK_THAT(f.planError({"-H", two, "-i", "127.0.0.2", "-e", "127.0.0.3", "x"}),
             Contains("include_str and exclude_str are mutually exclusive"));
  CHECK_THAT(f.planError({"-H", two, "-i", "127.0.0.2", "--num_gpus", "1", "x"}),
             Contains("Cannot specify num_nodes/gpus with include/exclude"));
}

TEST_CASE("job: master address, --no_ssh and per-job values", "[unit]") {
  Fixture f;
  std::string two = f.dir.file("two");
  CHECK(f.plan({"-H", two, "x"}).spec.masterAddr == "127.0.0.2");
  // Multi-node: the launch directory is prepended to PYTHONPATH, as DeepSpeed does.
  CHECK(f.plan({"-H", two, "x"}).spec.exports.at("PYTHONPATH") == f.dir.path());
  f.env["PYTHONPATH"] = "/lib/py";
  CHECK(f.plan({"-H", two, "x"}).spec.exports.at("PYTHONPATH") == f.dir.path() + ":/lib/py");
  f.env.erase("PYTHONPATH");
  CHECK(f.plan({"-H", two, "--master_addr", "10.1.1.1", "x"}).spec.masterAddr == "10.1.1.1");
  // DeepSpeed forced 127.0.0.1 over the flag for a local run; the flag wins here.
  CHECK(f.plan({"--master_addr", "10.1.1.1", "x"}).spec.masterAddr == "10.1.1.1");
  ds::test::writeFile(f.dir.file("alias"), "no-such-host.invalid slots=1\nb.invalid slots=1\n");
  CHECK_THAT(f.planError({"-H", f.dir.file("alias"), "x"}),
             Contains("pass --master_addr with node 0's address"));
  // An ssh_config alias: its HostName is node 0's address (DS_SSH_CONFIG, else ~/.ssh/config).
  ds::test::writeFile(f.dir.file("aliases"), "node1 slots=1\nnode2 slots=1\n");
  ds::test::writeFile(f.dir.file("ssh_config"),
                      "Host node1\n  HostName 127.0.0.2\nHost node2\n  HostName 127.0.0.3\n");
  f.env["DS_SSH_CONFIG"] = f.dir.file("ssh_config");
  CHECK(f.plan({"-H", f.dir.file("aliases"), "x"}).spec.masterAddr == "127.0.0.2");
  f.env.erase("DS_SSH_CONFIG");
  // Node 0 named 'localhost' cannot be the master of a host elsewhere.
  ds::test::writeFile(f.dir.file("mixed"), "localhost slots=1\n10.9.9.9 slots=1\n");
  CHECK_THAT(f.planError({"-H", f.dir.file("mixed"), "x"}),
             Contains("node 0 is 'localhost', a loopback name that host '10.9.9.9' cannot reach"));
  ds::test::writeFile(f.dir.file("loop"), "localhost slots=1\n127.0.0.2 slots=1\n");
  CHECK(f.plan({"-H", f.dir.file("loop"), "x"}).spec.masterAddr == "localhost");

  JobPlan k = f.plan({"-H", two, "--no_ssh", "--node_rank", "1", "x"});
  CHECK(k.noSsh);
  CHECK(k.nodeRank == 1);
  CHECK(k.spec.runner == RunnerKind::kLocal);
  // Every node computes the same job id without talking to the others.
  CHECK(f.plan({"-H", two, "--no_ssh", "--node_rank", "0", "x"}).spec.jobId == k.spec.jobId);
  CHECK(k.spec.jobToken == "job:" + k.spec.jobId);  // what a rank without a token derives
  CHECK_THAT(k.notices.at(0), Contains("without DS_JOB_TOKEN"));
  CHECK_THAT(f.planError({"-H", two, "--no_ssh", "--node_rank", "2", "x"}),
             Contains("--node_rank is not set correctly. (--node_rank 2: expected 0..1"));
  CHECK_THAT(f.planError({"-H", two, "--no_ssh", "x"}), Contains("--node_rank -1"));
  CHECK_THAT(f.planError({"--node_rank", "0", "x"}),
             Contains("--node_rank is only meaningful with --no_ssh"));
  f.env["DS_JOB_TOKEN"] = "shared-secret";
  CHECK(f.plan({"-H", two, "--no_ssh", "--node_rank", "0", "x"}).spec.jobToken == "shared-secret");

  JobPlan v = f.plan({"--save_pid", "--bind_core_list", "0,2-3", "--enable_each_rank_log", "logs",
                      "--ssh_port", "2222", "--launcher_args", "-a 'b c'", "x"});
  CHECK(v.spec.savePidFile == "/tmp/4242.dsrun");
  CHECK(v.spec.bindCoresToRank);
  CHECK(v.spec.bindCoreList == "0,2-3");
  CHECK(v.spec.eachRankLogDir == f.dir.file("logs"));
  CHECK(v.spec.sshPort == 2222);
  CHECK(v.spec.launcherArgs == "-a 'b c'");
  CHECK(f.plan({"--enable_each_rank_log", "None", "x"}).spec.eachRankLogDir.empty());
  ds::test::writeFile(f.dir.file("afile"), "");
  CHECK_THAT(f.planError({"--enable_each_rank_log", f.dir.file("afile"), "x"}),
             Contains("should not be a file, it should be a directory"));
  CHECK_THAT(f.planError({"--bind_core_list", "3-1", "x"}),
             Contains("--bind_core_list: Bad range '3-1'"));
  CHECK_THAT(f.planError({"--bind_core_list", "0, 1", "x"}), Contains("Bad range ' 1'"));
  CHECK(parseCoreList("0,2-4,7") == std::vector<int>{0, 2, 3, 4, 7});
  CHECK_THAT(f.planError({"--launcher_args", "'open", "x"}),
             Contains("--launcher_args: unterminated quote"));
  CHECK_THAT(f.planError({"--master_port", "70000", "x"}), Contains("--master_port must be in"));
  f.env["KMP_AFFINITY"] = "compact";
  CHECK_THAT(f.planError({"--bind_cores_to_rank", "x"}), Contains("unset KMP_AFFINITY"));
}

TEST_CASE("job: CUDA_VISIBLE_DEVICES selects local slots unless filters are given", "[unit]") {
  Fixture f;
  f.env["CUDA_VISIBLE_DEVICES"] = "0,2";
  JobPlan p = f.plan({"x"});
  CHECK(p.spec.hosts[0].slots == std::vector<int>{0, 2});
  CHECK_THAT(p.notices.at(0), Contains("setting --include=localhost:0,2"));
  JobPlan q = f.plan({"--num_gpus", "1", "x"});
  CHECK(q.spec.hosts[0].slots == std::vector<int>{0});
  CHECK_THAT(q.notices.at(0), Contains("but ignoring it"));
}

TEST_CASE("dry run: local and --no_ssh list each rank's command", "[unit]") {
  Fixture f;
  std::string text = f.dryRun({"--num_gpus", "2", "train", "p.yaml"});
  CHECK(contains(text, "launcher local, 1 host, world size 2, master 127.0.0.1:29500"));
  CHECK(contains(text, "localhost (node 0): ranks started by this dsrun"));
  CHECK(contains(text,
                 "rank 0 (LOCAL_RANK 0, CROSS_RANK 0, slot 0): /opt/ds/bin/dsrt train "
                 "p.yaml --local_rank=0"));
  CHECK(contains(text,
                 "rank 1 (LOCAL_RANK 1, CROSS_RANK 0, slot 1): /opt/ds/bin/dsrt train "
                 "p.yaml --local_rank=1"));
  text =
      f.dryRun({"-H", f.dir.file("two"), "--no_ssh", "--node_rank", "1", "--no_local_rank", "x"});
  CHECK(contains(text, "--no_ssh: this dsrun runs node 1 only"));
  CHECK(contains(text, "127.0.0.3 (node 1): ranks started by this dsrun"));
  CHECK(contains(text, "rank 3 (LOCAL_RANK 1, CROSS_RANK 1, slot 1): x\n"));
}

TEST_CASE("dry run: ssh and pdsh print the agent command of every host", "[unit]") {
  Fixture f;
  std::string two = f.dir.file("two");
  JobPlan p = f.plan({"-H", two, "python3", "a b.py"});
  std::string text = dryRunText(p, "/opt/ds/bin/dsrun", f.env);
  auto cmds = sshCommands(p.spec, "/opt/ds/bin/dsrun");
  CHECK(contains(text, "127.0.0.2 (node 0): " + cmds[0] + "\n"));
  CHECK(contains(text, "127.0.0.3 (node 1): " + cmds[1] + "\n"));
  CHECK(contains(text,
                 "rank 2 (LOCAL_RANK 0, CROSS_RANK 1, slot 0): python3 'a b.py' "
                 "--local_rank=0"));
  CHECK(text.find(p.spec.jobToken) == std::string::npos);

  text = f.dryRun({"-H", two, "--launcher", "pdsh", "x"});
  CHECK(contains(text, "pdsh: "));
  CHECK(contains(text, "DS_JOB_TOKEN=<hidden>"));
  CHECK(contains(text, "pdsh -S -f 1024 -R ssh -w 127.0.0.2,127.0.0.3 "));
  CHECK(contains(text, "--node_rank %n"));
  CHECK(contains(text, "127.0.0.3 (node 1): cd "));
}

TEST_CASE("dry run: openmpi, mpich and slurm print the launcher command", "[unit]") {
  Fixture f;
  std::string two = f.dir.file("two");
  std::string text = f.dryRun(
      {"-H", two, "--launcher", "openmpi", "--launcher_args", "--mca btl self,tcp", "x", "y"});
  CHECK(contains(text, "mpirun: "));
  CHECK(contains(text, "mpirun -n 4 --hostfile /tmp/dsrun-"));
  CHECK(contains(text, "-x DS_JOB_TOKEN"));
  // Every rank through the rank wrapper; the per-host lines show the program itself.
  CHECK(contains(text, "--mca btl self,tcp /opt/ds/bin/dsrun --rank_exec -- x y\n"));
  CHECK(contains(text, "#   127.0.0.2 slots=2\n#   127.0.0.3 slots=2\n"));
  CHECK(contains(text, "# 127.0.0.3 (node 1): ranks 2..3 started by mpirun: x y"));

  text = f.dryRun({"-H", two, "--launcher", "mpich", "x"});
  CHECK(contains(text, "mpich: "));
  CHECK(contains(text, " -n 4 -ppn 2 -hosts 127.0.0.2,127.0.0.3 "));
  CHECK(contains(text, "-genvlist DS_JOB_TOKEN /opt/ds/bin/dsrun --rank_exec -- x\n"));

  text = f.dryRun({"-H", two, "--launcher", "slurm", "x"});
  CHECK(contains(text,
                 "srun -n 4 --nodes 2 --ntasks-per-node 2 --nodelist=127.0.0.2,127.0.0.3 "
                 "--export=ALL --kill-on-bad-exit=1 --job-name=dsrun-"));
  CHECK(contains(text, " /opt/ds/bin/dsrun --rank_exec -- x\n"));
}
