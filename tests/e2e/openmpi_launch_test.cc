// dsrun --launcher openmpi end to end: real mpirun (plm_rsh_agent = ssh -F <cluster config>)
// starting ranks on 127.0.0.2 and 127.0.0.3 through the private sshd. Ranks get no RANK from
// dsrun here; the check derives it from OMPI_COMM_WORLD_* exactly as dsrt does (deriveRankEnv).
#include "tests/e2e/launch_e2e.h"

using namespace ds::test;
using namespace ds::test::e2e;

namespace {
// Several "hosts" on one machine: no shared-memory BTL (segment names collide), no binding
// (both orteds bind to core 0), yield when idle (feasibility.md §3.4).
const char* kMpiFlags =
    "--launcher_args '--mca btl self,tcp --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo "
    "--bind-to none --mca mpi_yield_when_idle 1'";
}  // namespace

TEST_CASE("openmpi launch: 2 hosts x 2 ranks, rank environment derived from OMPI_*", "[e2e]") {
  DS_NEED_CLUSTER();
  caseRanks("openmpi", {"127.0.0.2", "127.0.0.3"}, kMpiFlags, /*rawVars=*/false);
}

// mpirun's "Process name: [[j,1],3]" / "Exit code: 3" block names the rank only; the host comes
// from the hostfile dsrun generated (mpirun fills its hosts in order).
TEST_CASE("openmpi launch: rank 3 exits 3 -> job exits 3 naming rank and host", "[e2e]") {
  DS_NEED_CLUSTER();
  caseFail3("openmpi", kMpiFlags,
            {"dsrun: rank 3 (local rank 1) on host 127.0.0.3 (node 1) failed (exited with code 3): "
             "job status 3"});
}

// "mpirun noticed that process rank 3 with PID P on node 127.0.0.3 exited on signal 9".
TEST_CASE("openmpi launch: rank 3 killed by SIGKILL -> job exits 137", "[e2e]") {
  DS_NEED_CLUSTER();
  caseKill9("openmpi", kMpiFlags,
            {"dsrun: rank 3 (local rank 1) on host 127.0.0.3 (node 1) failed (was killed by "
             "signal 9 (SIGKILL)): job status 137"});
}

// With a placement flag dsrun cannot know where rank 3 ran: only mpirun's word is used.
TEST_CASE("openmpi launch: --map-by node in --launcher_args -> no host guessed", "[e2e]") {
  DS_NEED_CLUSTER();
  std::string flags = std::string(kMpiFlags);
  flags.insert(flags.size() - 1, " --map-by node");
  caseFail3("openmpi", flags, {"dsrun: rank 3 failed (exited with code 3): job status 3"});
}

TEST_CASE("openmpi launch: SIGTERM to dsrun leaves no rank on any host", "[e2e]") {
  DS_NEED_CLUSTER();
  caseSignal("openmpi", SIGTERM, kMpiFlags);
}

TEST_CASE("openmpi launch: SIGINT to dsrun leaves no rank on any host", "[e2e]") {
  DS_NEED_CLUSTER();
  caseSignal("openmpi", SIGINT, kMpiFlags);
}

TEST_CASE("openmpi launch: SIGKILL to dsrun leaves no rank after a few seconds", "[e2e]") {
  DS_NEED_CLUSTER();
  caseSignal("openmpi", SIGKILL, kMpiFlags);
}
