// The built dsrun binary: --version/--help (every flag in both spellings), bad flags (exit 2, one
// clear line), each runner's --dry_run command, and a real local launch where hostile program
// arguments and --export values arrive verbatim and nothing else executes.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <regex>

#include "core/env.h"
#include "ds/config.h"
#include "launcher/local_host.h"
#include "launcher/shell_quote.h"
#include "tests/support/spawn_ranks.h"
#include "tests/support/test_cluster.h"

using Catch::Matchers::Contains;
using ds::launcher::shellJoin;
using ds::launcher::shellQuote;

namespace {

const std::string kDsrun = std::string(DS_BINARY_DIR) + "/dsrun";

struct Result {
  int rc;
  std::string out;  // stdout and stderr
};

// Runs dsrun with args (each word shell-quoted) in `cwd`, HOME pointing there too.
Result dsrun(const std::vector<std::string>& args, const std::string& cwd,
             const std::string& envPrefix = "") {
  std::vector<std::string> words{kDsrun};
  words.insert(words.end(), args.begin(), args.end());
  std::string cmd = "cd " + shellQuote(cwd) + " && HOME=" + shellQuote(cwd) + " " + envPrefix +
                    " " + shellJoin(words) + " 2>&1";
  Result r;
  r.rc = ds::test::runCommand(cmd, &r.out, std::chrono::seconds(60));
  return r;
}

bool contains(const std::string& hay, const std::string& needle) {
  return hay.find(needle) != std::string::npos;
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// A 128-bit token is 32 hex digits; nothing printed may look like one.
bool showsToken(const std::string& text) {
  return std::regex_search(text, std::regex("[0-9a-f]{32}"));
}

struct Cluster {
  ds::test::TempDir dir;
  std::string hosts;
  Cluster() : hosts(dir.file("hosts")) {
    ds::test::writeFile(hosts, "# two loopback hosts\n127.0.0.2 slots=2\n127.0.0.3 slots=2\n");
  }
};

}  // namespace

TEST_CASE("dsrun binary: --version and --help", "[e2e]") {
  ds::test::TempDir dir;
  REQUIRE(exists(kDsrun));
  Result v = dsrun({"--version"}, dir.path());
  CHECK(v.rc == 0);
  CHECK(v.out == std::string("dsrun ") + DS_VERSION + "\n");
  Result h = dsrun({"--help"}, dir.path());
  CHECK(h.rc == 0);
  for (const char* flag : {"-H,--hostfile",
                           "-i,--include",
                           "-e,--exclude",
                           "--num_nodes,--num-nodes",
                           "--num_gpus,--num-gpus,--num_accelerators,--num-accelerators",
                           "--master_addr,--master-addr",
                           "--master_port,--master-port",
                           "--launcher ",
                           "--launcher_args,--launcher-args",
                           "--no_local_rank,--no-local-rank",
                           "--no_ssh,--no-ssh",
                           "--node_rank,--node-rank",
                           "--force_multi,--force-multi",
                           "--enable_each_rank_log,--enable-each-rank-log",
                           "--bind_cores_to_rank,--bind-cores-to-rank",
                           "--bind_core_list,--bind-core-list",
                           "--ssh_port,--ssh-port",
                           "--save_pid,--save-pid",
                           "--export",
                           "--comm_backend,--comm-backend",
                           "--max_restarts,--max-restarts",
                           "--dry_run,--dry-run",
                           "--version",
                           "ssh (default), pdsh, openmpi, mpich, slurm",
                           "PROGRAM [ARGS...]",
                           "Exit status:",
                           "DS_KILL_GRACE",
                           "--help-env",
                           "docs/knobs.md"}) {
    INFO(flag);
    CHECK(contains(h.out, flag));
  }
}

TEST_CASE("dsrun binary: --help-env lists the variables dsrun reads", "[e2e]") {
  ds::test::TempDir dir;
  Result h = dsrun({"--help-env"}, dir.path());
  CHECK(h.rc == 0);
  INFO(h.out);
  for (const char* text :
       {"DS_KILL_GRACE  (seconds in [0, 3600], default: 5)", "DS_SSH_CONFIG  (path, default: none)",
        "DS_SSH_TEARDOWN_GRACE  (int in [1, 3600], default: 15)",
        "DS_LOG_LEVEL  (one of error, warn, info or debug, default: info)",
        "DS_TIMEOUT  (seconds > 0, default: 300)", "HOME  (path, default: none) (set by another",
        "DS_JOB_TOKEN"}) {
    CHECK(contains(h.out, text));
  }
  // Only what dsrun itself reads: the ranks' variables and comm's knobs are dsrt's.
  CHECK_FALSE(contains(h.out, "WORLD_SIZE"));
  CHECK_FALSE(contains(h.out, "DS_GLOO_PIECE_BYTES"));
}

TEST_CASE("dsrun binary: bad input exits 2 with one clear line", "[e2e]") {
  Cluster c;
  ds::test::writeFile(c.dir.file("bad"), "127.0.0.2 slots=2\n127.0.0.2 slots=1\n");
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{"--bogus", "x"}, "unknown option '--bogus'"},
      {{"--num_gpus", "two", "x"}, "(see dsrun --help)"},
      {{}, "no program given"},
      {{"--launcher", "torque", "x"}, "unknown launcher 'torque'"},
      {{"-H", c.dir.file("missing"), "x"},
       "--hostfile " + c.dir.file("missing") + ": No such file"},
      {{"-H", c.dir.file("bad"), "x"},
       c.dir.file("bad") + ":2: bad hostfile entry '127.0.0.2 slots=1'"},
      {{"-H", c.hosts, "-i", "127.0.0.9", "x"}, "Hostname '127.0.0.9' not found in hostfile"},
      {{"-H", c.hosts, "-i", "127.0.0.2:2", "x"}, "No slot '2' specified on host '127.0.0.2'"},
      {{"-H", c.hosts, "-i", "127.0.0.2", "-e", "127.0.0.3", "x"}, "mutually exclusive"},
      {{"-H", c.hosts, "-i", "127.0.0.2", "--num_gpus", "1", "x"},
       "Cannot specify num_nodes/gpus with include/exclude"},
      {{"--export", "A;B=1", "x"}, "'A;B' is not a valid variable name"},
      {{"--no_ssh", "-H", c.hosts, "--node_rank", "5", "x"}, "--node_rank is not set correctly"},
  };
  for (const Case& k : cases) {
    INFO(shellJoin(k.args));
    Result r = dsrun(k.args, c.dir.path());
    INFO(r.out);
    CHECK(r.rc == 2);
    CHECK(contains(r.out, "dsrun: error: "));
    CHECK(contains(r.out, k.says));
    CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
  }
}

TEST_CASE("dsrun binary: --dry_run prints each runner's exact command", "[e2e]") {
  Cluster c;
  std::string dsrunReal = kDsrun;  // the agent path is this executable's (/proc/self/exe)
  {
    char buf[4096] = {};
    if (::realpath(kDsrun.c_str(), buf)) dsrunReal = buf;
  }
  SECTION("local, train resolves to the dsrt next to dsrun") {
    Result r = dsrun({"--num_gpus", "2", "--dry_run", "train", "plan.yaml"}, c.dir.path());
    CHECK(r.rc == 0);
    CHECK(contains(r.out, "launcher local, 1 host, world size 2, master 127.0.0.1:29500"));
    std::string dsrt = dsrunReal.substr(0, dsrunReal.rfind('/')) + "/dsrt";
    CHECK(contains(r.out, "rank 1 (LOCAL_RANK 1, CROSS_RANK 0, slot 1): " + dsrt +
                              " train plan.yaml --local_rank=1"));
    CHECK_FALSE(showsToken(r.out));
  }
  SECTION("ssh: one agent command per host") {
    Result r = dsrun({"-H", c.hosts, "--dry-run", "python3", "x.py"}, c.dir.path());
    CHECK(r.rc == 0);
    CHECK(contains(r.out, "launcher ssh, 2 hosts, world size 4, master 127.0.0.2:29500"));
    std::regex line("127\\.0\\.0\\.(2|3) \\(node (0|1)\\): cd \\S+ && exec env .*" +
                    std::regex_replace(dsrunReal, std::regex("[.^$|()\\[\\]{}*+?\\\\]"), "\\$&") +
                    " --agent --job [A-Za-z0-9_=-]+ --node_rank (0|1) --token_stdin\n");
    auto begin = std::sregex_iterator(r.out.begin(), r.out.end(), line);
    CHECK(std::distance(begin, std::sregex_iterator()) == 2);
    CHECK(contains(r.out,
                   "rank 3 (LOCAL_RANK 1, CROSS_RANK 1, slot 1): python3 x.py "
                   "--local_rank=1"));
    CHECK_FALSE(showsToken(r.out));
  }
  SECTION("pdsh") {
    Result r = dsrun({"-H", c.hosts, "--launcher", "pdsh", "--ssh_port", "2222", "--dry_run", "x"},
                     c.dir.path());
    CHECK(r.rc == 0);
    CHECK(contains(r.out, "pdsh -S -f 1024 -R ssh -w 127.0.0.2,127.0.0.3 "));
    CHECK(contains(r.out, "--node_rank %n"));
    CHECK(contains(r.out, "PDSH_SSH_ARGS_APPEND='-tt -o SendEnv=DS_JOB_TOKEN -p 2222'"));
    CHECK(contains(r.out, "DS_JOB_TOKEN=<hidden>"));
    CHECK_FALSE(showsToken(r.out));
  }
  SECTION("openmpi, also implied by --comm_backend mpi") {
    for (auto args : {std::vector<std::string>{"--launcher", "openmpi"},
                      std::vector<std::string>{"--comm_backend", "mpi"}}) {
      args.insert(args.end(), {"-H", c.hosts, "--launcher_args", "--mca btl self,tcp", "--dry_run",
                               "prog", "a b"});
      Result r = dsrun(args, c.dir.path());
      INFO(r.out);
      CHECK(r.rc == 0);
      CHECK(contains(r.out, "mpirun -n 4 --hostfile /tmp/dsrun-"));
      CHECK(contains(r.out, "-x MASTER_ADDR"));
      CHECK(contains(r.out, "--mca btl self,tcp " + kDsrun + " --rank_exec -- prog 'a b'\n"));
      CHECK(contains(r.out, "#   127.0.0.3 slots=2"));
      CHECK_FALSE(showsToken(r.out));
    }
  }
  SECTION("mpich and slurm") {
    Result m = dsrun({"-H", c.hosts, "--launcher", "mpich", "--dry_run", "prog"}, c.dir.path());
    CHECK(m.rc == 0);
    CHECK(contains(m.out, " -n 4 -ppn 2 -hosts 127.0.0.2,127.0.0.3 "));
    CHECK(contains(m.out, "-genvlist DS_JOB_TOKEN " + kDsrun + " --rank_exec -- prog"));
    Result s = dsrun({"-H", c.hosts, "--launcher", "slurm", "--dry_run", "prog"}, c.dir.path());
    CHECK(s.rc == 0);
    CHECK(contains(s.out,
                   "srun -n 4 --nodes 2 --ntasks-per-node 2 "
                   "--nodelist=127.0.0.2,127.0.0.3 --export=ALL --kill-on-bad-exit=1 "
                   "--job-name=dsrun-"));
    CHECK(contains(s.out, "--job-name=dsrun-"));
    CHECK(contains(s.out, " " + kDsrun + " --rank_exec -- prog\n"));
    CHECK_FALSE(showsToken(m.out + s.out));
  }
  SECTION("--no_ssh runs one node's share") {
    Result r =
        dsrun({"-H", c.hosts, "--no_ssh", "--node_rank", "1", "--dry_run", "prog"}, c.dir.path());
    CHECK(r.rc == 0);
    CHECK(contains(r.out, "127.0.0.3 (node 1): ranks started by this dsrun"));
    CHECK(contains(r.out, "rank 2 (LOCAL_RANK 0, CROSS_RANK 1, slot 0): prog --local_rank=0"));
  }
}

TEST_CASE("dsrun binary: a local run passes hostile arguments and exports verbatim", "[e2e]") {
  ds::test::TempDir dir;
  std::string canary = dir.file("pwned");
  std::vector<std::string> hostile = {"a b", "$(touch " + canary + ")", "; touch " + canary,
                                      "`touch " + canary + "`", "it's \"q\""};
  std::vector<std::string> args = {"--num_gpus",
                                   "2",
                                   "--no_local_rank",
                                   "--export",
                                   "V=$(touch " + canary + ");x",
                                   "/bin/sh",
                                   "-c",
                                   "printf '<%s>' \"$RANK\" \"$WORLD_SIZE\" \"$V\" \"$@\"; echo",
                                   "sh"};
  args.insert(args.end(), hostile.begin(), hostile.end());
  Result r = dsrun(args, dir.path());
  INFO(r.out);
  CHECK(r.rc == 0);
  std::string tail = "<$(touch " + canary + ");x><a b><$(touch " + canary + ")><; touch " + canary +
                     "><`touch " + canary + "`><it's \"q\">";
  CHECK(contains(r.out, "<0><2>" + tail));
  CHECK(contains(r.out, "<1><2>" + tail));
  CHECK_FALSE(exists(canary));
}

TEST_CASE("dsrun binary: --no_shm turns the shared-memory transport off on every rank", "[e2e]") {
  ds::test::TempDir dir;
  const std::vector<std::string> show = {"/bin/sh", "-c", "echo \"<$RANK:${DS_COMM_SHM-unset}>\""};
  std::vector<std::string> args = {"--num_gpus", "2", "--no_local_rank", "--no_shm"};
  args.insert(args.end(), show.begin(), show.end());
  Result r = dsrun(args, dir.path());
  INFO(r.out);
  CHECK(r.rc == 0);
  CHECK(contains(r.out, "<0:0>"));
  CHECK(contains(r.out, "<1:0>"));
  // It outranks an --export of the same variable; without it nothing is exported.
  args = {"--num_gpus", "1", "--no_local_rank", "--export", "DS_COMM_SHM=1", "--no_shm"};
  args.insert(args.end(), show.begin(), show.end());
  r = dsrun(args, dir.path());
  CHECK(contains(r.out, "<0:0>"));
  args = {"--num_gpus", "1", "--no_local_rank"};
  args.insert(args.end(), show.begin(), show.end());
  r = dsrun(args, dir.path());
  INFO(r.out);
  CHECK((contains(r.out, "<0:unset>") || contains(r.out, "<0:1>")));
}

TEST_CASE("dsrun binary: a failing rank's status is the job's", "[e2e]") {
  ds::test::TempDir dir;
  Result r = dsrun({"--num_gpus", "2", "/bin/sh", "-c", "[ \"$RANK\" = 1 ] && exit 3; exit 0"},
                   dir.path());
  INFO(r.out);
  CHECK(r.rc == 3);
}

TEST_CASE("dsrun binary: a missing launcher tool is an error before anything starts", "[e2e]") {
  Cluster c;
  for (const char* launcher : {"pdsh", "openmpi", "slurm"}) {
    INFO(launcher);
    Result r = dsrun({"-H", c.hosts, "--launcher", launcher, "/bin/true"}, c.dir.path(),
                     "PATH=" + c.dir.path());
    INFO(r.out);
    CHECK(r.rc == 2);
    CHECK(contains(r.out, std::string("dsrun: error: --launcher ") + launcher + ": '"));
    CHECK(contains(r.out, "not found on PATH"));
  }
  // Open MPI's mpirun does not speak hydra's -ppn/-genv: refused up front, not half-run.
  ds::EnvMap env = ds::currentEnv();
  bool hydra = false;
  for (const char* n : {"mpiexec.hydra", "mpirun.mpich", "mpiexec.mpich"})
    hydra = hydra || !ds::launcher::findOnPath(n, env).empty();
  char real[4096] = {};
  std::string mpirun = ds::launcher::findOnPath("mpirun", env);
  if (!hydra && !mpirun.empty() && ::realpath(mpirun.c_str(), real) &&
      (contains(real, "orterun") || contains(real, "openmpi"))) {
    Result r = dsrun({"-H", c.hosts, "--launcher", "mpich", "/bin/true"}, c.dir.path());
    INFO(r.out);
    CHECK(r.rc == 2);
    CHECK(contains(r.out, "no MPICH hydra launcher on PATH"));
  }
}

namespace {
// A rank program that scans every process's command line on this machine for its own
// DS_JOB_TOKEN (awk reads it from the environment, so the scan itself never holds it in argv).
const char* kTokenScan =
    "for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < \"$f\"; echo; done 2>/dev/null | "
    "awk 'index($0, ENVIRON[\"DS_JOB_TOKEN\"]) {n++} END {print \"tok=\" length(ENVIRON["
    "\"DS_JOB_TOKEN\"]) \" leaks=\" n+0}'";

int countOf(const std::string& hay, const std::string& needle) {
  int n = 0;
  for (size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++n;
  return n;
}
}  // namespace

TEST_CASE("dsrun binary: DS_JOB_TOKEN is on no command line while the job runs (local)", "[e2e]") {
  ds::test::TempDir dir;
  Result r = dsrun({"--num_gpus", "2", "--no_local_rank", "/bin/sh", "-c", kTokenScan}, dir.path());
  INFO(r.out);
  CHECK(r.rc == 0);
  CHECK(countOf(r.out, "tok=32 leaks=0") == 2);
}

TEST_CASE(
    "dsrun binary: DS_JOB_TOKEN is on no command line while the job runs (ssh, pdsh, "
    "openmpi)",
    "[e2e]") {
  if (auto why = ds::test::TestCluster::skipReason(); !why.empty())
    DS_SKIP("test cluster: " << why);
  ds::test::TempDir dir;
  ds::test::TestCluster cluster(2);
  ds::test::writeFile(dir.file("hosts"),
                      cluster.addr(0) + " slots=2\n" + cluster.addr(1) + " slots=1\n");
  for (const char* launcher : {"ssh", "pdsh", "openmpi"}) {
    INFO(launcher);
    std::vector<std::string> args = {"-H", dir.file("hosts"), "--launcher", launcher,
                                     "--no_local_rank"};
    if (std::string(launcher) == "openmpi")
      args.insert(args.end(), {"--launcher_args",
                               "--mca oob_tcp_if_include lo --mca btl self,tcp --bind-to none"});
    args.insert(args.end(), {"/bin/sh", "-c", kTokenScan});
    Result r = dsrun(args, dir.path(), cluster.envPrefix());
    INFO(r.out);
    CHECK(r.rc == 0);
    CHECK(countOf(r.out, "tok=32 leaks=0") == 3);
  }
}
