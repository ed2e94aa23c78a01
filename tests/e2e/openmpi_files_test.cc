// dsrun --launcher openmpi and its hostfile in $TMPDIR/dsrun-<uid>: a really SIGKILLed dsrun
// leaves its hostfile behind (it cannot remove it), and the next dsrun removes it and runs.
#include <unistd.h>

#include <filesystem>

#include "tests/e2e/launch_e2e.h"

using namespace ds::test;
using namespace ds::test::e2e;

namespace {
// As in openmpi_launch_test.cc: several "hosts" on one machine.
const char* kMpiFlags =
    "--launcher_args '--mca btl self,tcp --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo "
    "--bind-to none --mca mpi_yield_when_idle 1'";

std::vector<std::string> hostfilesIn(const std::string& dir) {
  std::vector<std::string> out;
  if (!std::filesystem::exists(dir)) return out;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    out.push_back(e.path().filename().string());
  return out;
}
}  // namespace

TEST_CASE("openmpi launch: a SIGKILLed dsrun's hostfile is removed by the next dsrun", "[e2e]") {
  DS_NEED_CLUSTER();
  RemoteJob job;
  TempDir tmp;
  const std::string useTmp = "export TMPDIR=" + tmp.path() + "; ";
  const std::string dir = tmp.path() + "/dsrun-" + std::to_string(::geteuid());
  {
    Background bg(useTmp + job.command("openmpi", "hang", job.addrs(), kMpiFlags),
                  job.tmp.file("out"));
    const bool up = waitRanksUp(job.tmp, 4, std::chrono::seconds(90));
    INFO(bg.output());
    REQUIRE(up);
    const auto during = hostfilesIn(dir);
    REQUIRE(during.size() == 1);
    CHECK(during[0].rfind(std::to_string(bg.pid()) + "-dsrun-", 0) == 0);
    bg.signal(SIGKILL);
    CHECK(bg.wait(std::chrono::seconds(60)) == 137);
    CHECK(waitNoProcesses(job.script, std::chrono::seconds(20)).empty());
    CHECK(hostfilesIn(dir) == during);  // left behind by the kill
  }
  std::string out;
  const int rc = runCommand(useTmp + job.command("openmpi", "ok", job.addrs(), kMpiFlags), &out,
                            std::chrono::seconds(120));
  INFO(out);
  CHECK(rc == 0);
  CHECK(out.find("left by a dsrun that is no longer running") != std::string::npos);
  CHECK(hostfilesIn(dir).empty());
}
