// Runner command builders: the node-agent command (ssh, pdsh) survives a real /bin/sh with hostile
// values intact; pdsh, mpirun (Open MPI, hydra) and srun argv; DS_JOB_TOKEN never on any of them.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include "core/error.h"
#include "launcher/job_spec_codec.h"
#include "launcher/runner_commands.h"
#include "launcher/shell_quote.h"
#include "tests/support/spawn_ranks.h"

using namespace ds::launcher;
using Catch::Matchers::Contains;

namespace {

const std::string kToken = "f00dfeedf00dfeedf00dfeedf00dfeed";

JobSpec twoHosts() {
  JobSpec s;
  s.hosts = {{"127.0.0.2", {0, 1}}, {"127.0.0.3", {0, 1}}};
  s.runner = RunnerKind::kSsh;
  s.masterAddr = "127.0.0.2";
  s.masterPort = 29555;
  s.jobId = "dsrun-0123456789ab";
  s.jobToken = kToken;
  s.program = {"/usr/bin/python3", "x.py", "--lr", "3e-4"};
  s.exports = {{"NCCL_DEBUG", "INFO"}};
  s.cwd = "/tmp";
  return s;
}

bool contains(const std::string& hay, const std::string& needle) {
  return hay.find(needle) != std::string::npos;
}

void requireNoToken(const std::vector<std::string>& argv) {
  for (const auto& a : argv) {
    INFO(a);
    CHECK_FALSE(contains(a, kToken));
  }
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// A fake dsrun that records its argv (one per line) and two variables, for running the agent
// command through a real shell.
std::string fakeDsrun(const ds::test::TempDir& dir) {
  std::string path = dir.file("fake dsrun");
  ds::test::writeFile(path,
                      "#!/bin/sh\n"
                      "out=\"$(dirname \"$0\")/seen\"\n"
                      "pwd > \"$out\"\n"
                      "printf '%s\\n' \"$WEIRD\" >> \"$out\"\n"
                      "for a in \"$@\"; do printf '%s\\n' \"$a\" >> \"$out\"; done\n");
  ::chmod(path.c_str(), 0755);
  return path;
}

}  // namespace

TEST_CASE("agent command: one per host with its node rank, token on stdin only", "[unit]") {
  JobSpec s = twoHosts();
  auto cmds = sshCommands(s, "/opt/ds/dsrun");
  REQUIRE(cmds.size() == 2);
  for (size_t i = 0; i < cmds.size(); ++i) {
    INFO(cmds[i]);
    CHECK(contains(cmds[i], "cd /tmp && exec env NCCL_DEBUG=INFO /opt/ds/dsrun --agent --job "));
    CHECK(contains(cmds[i], " --node_rank " + std::to_string(i) + " --token_stdin"));
    CHECK_FALSE(contains(cmds[i], kToken));
  }
  AgentCommand c = agentCommand(s, "/opt/ds/dsrun", false);
  CHECK(c.forNode("%n").find("--token_stdin") == std::string::npos);
  CHECK(contains(c.forNode("%n"), "--node_rank %n"));
}

TEST_CASE("agent command: hostile cwd, exports and args arrive intact through /bin/sh", "[unit]") {
  ds::test::TempDir dir;
  std::string canary = dir.file("pwned");
  std::string cwd = dir.file("it's a $(dir)");
  ::mkdir(cwd.c_str(), 0755);
  JobSpec s = twoHosts();
  s.cwd = cwd;
  std::string weird =
      "a'b \"c\" $(touch " + canary + ") `touch " + canary + "`; touch " + canary + "\nnext line";
  s.exports = {{"WEIRD", weird}, {"PERCENT", "100%n%%"}};
  s.program = {"prog; touch " + canary, "$(touch " + canary + ")", "arg with 'quotes'"};
  std::string dsrun = fakeDsrun(dir);

  auto cmds = sshCommands(s, dsrun);
  int rc =
      ds::test::runCommand("/bin/sh -c " + shellQuote(cmds[1]), nullptr, std::chrono::seconds(20));
  CHECK(rc == 0);
  std::string seen = ds::test::readFile(dir.file("seen"));
  std::string want = cwd + "\n" + weird + "\n--agent\n--job\n" + encodeJobSpec(s) +
                     "\n--node_rank\n1\n--token_stdin\n";
  CHECK(seen == want);
  // The job the agent decodes is the job that was built (program untouched), minus the token.
  JobSpec back = decodeJobSpec(encodeJobSpec(s));
  CHECK(back.program == s.program);
  CHECK(back.exports == s.exports);
  CHECK(back.jobToken.empty());
  CHECK_FALSE(exists(canary));

  // pdsh: its %-substitution (%n -> node rank, %% -> %) then the remote shell.
  Invocation inv = pdshInvocation(s, dsrun, {});
  std::string remote = inv.argv.back();
  std::string substituted;
  for (size_t i = 0; i < remote.size(); ++i) {
    if (remote[i] == '%' && i + 1 < remote.size()) {
      ++i;
      substituted += remote[i] == 'n' ? std::string("1") : std::string(1, remote[i]);
    } else {
      substituted += remote[i];
    }
  }
  ::unlink(dir.file("seen").c_str());
  rc = ds::test::runCommand("/bin/sh -c " + shellQuote(substituted), nullptr,
                            std::chrono::seconds(20));
  CHECK(rc == 0);
  CHECK(ds::test::readFile(dir.file("seen")) ==
        cwd + "\n" + weird + "\n--agent\n--job\n" + encodeJobSpec(s) + "\n--node_rank\n1\n");
  CHECK_FALSE(exists(canary));
}

TEST_CASE("pdsh: -R ssh, hosts in node order, %n node rank, ssh args kept", "[unit]") {
  JobSpec s = twoHosts();
  s.runner = RunnerKind::kPdsh;
  s.launcherArgs = "-u 30";
  s.sshPort = 2222;
  Invocation inv = pdshInvocation(s, "/opt/ds/dsrun", {{"PDSH_SSH_ARGS_APPEND", "-F /my/cfg"}});
  std::vector<std::string> head(inv.argv.begin(), inv.argv.begin() + 10);
  CHECK(head == std::vector<std::string>{"pdsh", "-S", "-f", "1024", "-R", "ssh", "-w",
                                         "127.0.0.2,127.0.0.3", "-u", "30"});
  REQUIRE(inv.argv.size() == 11);
  CHECK(contains(inv.argv[10], "--agent --job "));
  CHECK(contains(inv.argv[10], "--node_rank %n"));
  CHECK(inv.env.at("PDSH_SSH_ARGS_APPEND") == "-F /my/cfg -tt -o SendEnv=DS_JOB_TOKEN -p 2222");
  CHECK(inv.env.at("PDSH_RCMD_TYPE") == "ssh");
  CHECK(inv.env.at("DS_JOB_TOKEN") == kToken);  // in pdsh's environment, not its argv
  requireNoToken(inv.argv);
  CHECK(pdshEscape("a%b%%") == "a%%b%%%%");
}

TEST_CASE("openmpi: mpirun -n, generated hostfile, -x exports, launcher_args", "[unit]") {
  JobSpec s = twoHosts();
  s.runner = RunnerKind::kOpenMpi;
  s.commBackend = "mpi";
  s.launcherArgs = "--mca plm_rsh_args '-F /x y' --bind-to none";
  Invocation inv = openMpiInvocation(s, "/tmp/j.hostfile", /*asRoot=*/false);
  std::vector<std::string> head(inv.argv.begin(), inv.argv.begin() + 8);
  CHECK(head == std::vector<std::string>{"mpirun", "-n", "4", "--hostfile", "/tmp/j.hostfile",
                                         "--mca", "btl", "^openib"});
  CHECK(inv.hostfilePath == "/tmp/j.hostfile");
  CHECK(inv.hostfileText == "127.0.0.2 slots=2\n127.0.0.3 slots=2\n");
  std::string joined = shellJoin(inv.argv);
  for (const char* k : {"MASTER_ADDR", "MASTER_PORT", "DS_JOB_ID", "DS_COMM_BACKEND_FLAG",
                        "NCCL_DEBUG", "DS_JOB_TOKEN"}) {
    INFO(k);
    CHECK(contains(joined, std::string("-x ") + k + " "));
    CHECK(inv.env.count(k) == 1);
  }
  CHECK(contains(joined,
                 "--mca plm_rsh_args '-F /x y' --bind-to none /usr/bin/python3 x.py "
                 "--lr 3e-4"));
  const std::string tail = " /usr/bin/python3 x.py --lr 3e-4";  // the program comes last
  CHECK(joined.substr(joined.size() - tail.size()) == tail);
  CHECK(inv.env.at("MASTER_ADDR") == "127.0.0.2");
  CHECK(inv.env.at("DS_COMM_BACKEND_FLAG") == "mpi");
  CHECK(inv.env.count("DS_COMM_BACKEND") == 0);
  requireNoToken(inv.argv);

  // Root needs --allow-run-as-root; an explicit btl choice replaces the default one.
  s.launcherArgs = "--mca btl self,tcp";
  inv = openMpiInvocation(s, "/tmp/j.hostfile", true);
  CHECK(inv.argv[5] == "--allow-run-as-root");
  CHECK_FALSE(contains(shellJoin(inv.argv), "^openib"));
  // --ssh_port reaches mpirun's ssh unless launcher_args already sets plm_rsh_args.
  s.sshPort = 2222;
  CHECK(contains(shellJoin(openMpiInvocation(s, "/tmp/j", false).argv),
                 "--mca plm_rsh_args '-p 2222'"));
  s.launcherArgs = "--mca plm_rsh_args '-F cfg'";
  CHECK_FALSE(contains(shellJoin(openMpiInvocation(s, "/tmp/j", false).argv), "-p 2222"));
  s.sshPort = 0;
  // Ranks are started by count: a sparse slot list cannot be honoured.
  s.hosts[1].slots = {1};
  CHECK_THROWS_WITH(openMpiInvocation(s, "/tmp/j", false),
                    Contains("cannot use only slot 1 on host '127.0.0.3'"));
}

TEST_CASE("mpich: hydra -ppn, -hosts, -genv, token by name only", "[unit]") {
  JobSpec s = twoHosts();
  s.runner = RunnerKind::kMpich;
  s.launcherArgs = "-iface lo";
  Invocation inv = mpichInvocation(s, "mpiexec.hydra");
  std::string joined = shellJoin(inv.argv);
  CHECK(contains(joined, "mpiexec.hydra -n 4 -ppn 2 -hosts 127.0.0.2,127.0.0.3 "));
  CHECK(contains(joined, "-genv MASTER_ADDR 127.0.0.2"));
  CHECK(contains(joined, "-genv MASTER_PORT 29555"));
  CHECK(contains(joined, "-genv NCCL_DEBUG INFO"));
  CHECK(contains(joined, "-genvlist DS_JOB_TOKEN -iface lo /usr/bin/python3 x.py --lr 3e-4"));
  CHECK(inv.env.at("DS_JOB_TOKEN") == kToken);
  requireNoToken(inv.argv);
  s.hosts[1].slots = {0, 1, 2};
  CHECK_THROWS_WITH(mpichInvocation(s, "mpirun"),
                    Contains("MPICH requires same number of devices per node"));
}

TEST_CASE("slurm: srun -n, nodes, tasks per node, nodelist, exports by environment", "[unit]") {
  JobSpec s = twoHosts();
  s.runner = RunnerKind::kSlurm;
  s.launcherArgs = "--partition debug";
  Invocation inv = slurmInvocation(s, /*withNodelist=*/true);
  CHECK(shellJoin(inv.argv) ==
        "srun -n 4 --nodes 2 --ntasks-per-node 2 --nodelist=127.0.0.2,127.0.0.3 --export=ALL "
        "--kill-on-bad-exit=1 --partition debug --job-name=dsrun-0123456789ab /usr/bin/python3 "
        "x.py --lr 3e-4");
  // The guard's cancel names the job by DS_JOB_ID (passed as an argument, never spliced).
  REQUIRE(inv.cancelArgv.size() == 5);
  CHECK(inv.cancelArgv[0] == "/bin/sh");
  CHECK(inv.cancelArgv[4] == "dsrun-0123456789ab");
  CHECK(inv.env.at("MASTER_PORT") == "29555");
  CHECK(inv.env.at("NCCL_DEBUG") == "INFO");
  CHECK(inv.env.at("DS_JOB_TOKEN") == kToken);
  requireNoToken(inv.argv);
  CHECK_FALSE(contains(shellJoin(slurmInvocation(s, false).argv), "--nodelist"));
}

TEST_CASE("describeInvocation hides the token and quotes values", "[unit]") {
  JobSpec s = twoHosts();
  s.exports["V"] = "a b";
  std::string text = describeInvocation(slurmInvocation(s, false));
  CHECK(contains(text, "DS_JOB_TOKEN=<hidden>"));
  CHECK(contains(text, "V='a b'"));
  CHECK_FALSE(contains(text, kToken));
}

TEST_CASE("wrapRanks: every rank through dsrun --rank_exec, arguments untouched", "[unit]") {
  JobSpec s = twoHosts();
  JobSpec w = wrapRanks(s, "/opt/ds/dsrun");
  CHECK(w.program == std::vector<std::string>{"/opt/ds/dsrun", "--rank_exec", "--",
                                              "/usr/bin/python3", "x.py", "--lr", "3e-4"});
  CHECK(w.hosts.size() == s.hosts.size());
  CHECK(w.jobToken == s.jobToken);
  CHECK(shellJoin(mpichInvocation(w, "mpiexec.hydra").argv)
            .ends_with("-genvlist DS_JOB_TOKEN /opt/ds/dsrun --rank_exec -- /usr/bin/python3 x.py "
                       "--lr 3e-4"));
}
