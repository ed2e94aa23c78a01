// dsrun --launcher mpich: the hydra command through --dry_run (what it prints is exactly what
// would run), and end to end with Debian's mpich (mpiexec.hydra; its mpirun alternative ranks
// below Open MPI's, so the build's MPI is untouched) starting ranks on 127.0.0.2 and 127.0.0.3
// through the test cluster's sshd (HYDRA_LAUNCHER_EXEC = the cluster's ssh wrapper).
#include "tests/e2e/launch_e2e.h"

using namespace ds::test;
using namespace ds::test::e2e;

TEST_CASE("mpich launch: 2 hosts x 2 ranks, rank environment derived from PMI_*", "[e2e]") {
  DS_NEED_CLUSTER();
  if (::access("/usr/bin/mpiexec.hydra", X_OK) != 0)
    DS_SKIP("no /usr/bin/mpiexec.hydra (apt-get install mpich)");
  caseRanks("mpich", {"127.0.0.2", "127.0.0.3"}, "", /*rawVars=*/false);
}

TEST_CASE("mpich launch (--dry_run): hydra command with equal slots, token never printed",
          "[e2e]") {
  TempDir tmp;
  writeFile(tmp.file("hostfile"), "127.0.0.2 slots=2\n127.0.0.3 slots=2\n");
  std::string out;
  int rc =
      runCommand("cd " + tmp.path() + " && " + dsrunPath() + " --hostfile " + tmp.file("hostfile") +
                     " --launcher mpich --master_addr 127.0.0.2 --master_port 29511 "
                     "--dry_run /bin/echo 'a b' '$(touch " +
                     tmp.file("pwned") + ")'",
                 &out, std::chrono::seconds(60));
  INFO(out);
  REQUIRE(rc == 0);
  CHECK(out.find("-n 4") != std::string::npos);
  CHECK(out.find("-ppn 2") != std::string::npos);
  CHECK(out.find("-hosts 127.0.0.2,127.0.0.3") != std::string::npos);
  CHECK(out.find("-genv MASTER_ADDR 127.0.0.2") != std::string::npos);
  CHECK(out.find("-genv MASTER_PORT 29511") != std::string::npos);
  CHECK(out.find("-genvlist DS_JOB_TOKEN") != std::string::npos);
  CHECK(out.find("DS_JOB_TOKEN=<hidden>") != std::string::npos);
  CHECK(out.find("'a b'") != std::string::npos);
  CHECK(access(tmp.file("pwned").c_str(), F_OK) != 0);
}

TEST_CASE("mpich launch (--dry_run): unequal slots are refused naming the hosts", "[e2e]") {
  TempDir tmp;
  writeFile(tmp.file("hostfile"), "127.0.0.2 slots=2\n127.0.0.3 slots=1\n");
  std::string out;
  int rc = runCommand(
      dsrunPath() + " --hostfile " + tmp.file("hostfile") + " --launcher mpich --dry_run /bin/true",
      &out, std::chrono::seconds(60));
  INFO(out);
  CHECK(rc != 0);
  CHECK(out.find("same number of devices per node") != std::string::npos);
  CHECK(out.find("127.0.0.3") != std::string::npos);
}
