// dsrun --no_ssh --node_rank N end to end: two dsrun processes on this machine, one per node of a
// two-host hostfile (as under Kubernetes, each node starts its own share), running `dsrt hello`,
// which joins every rank through the store on MASTER_ADDR (127.0.0.1 here) and checks an
// allreduce over gloo. Rank numbering, the rendezvous, the shared token and no leftovers checked.
#include "tests/e2e/launch_e2e.h"
#include "tests/launcher/agent/process_probe.h"

#include <fmt/format.h>

using namespace ds::test;
using namespace ds::test::e2e;

namespace {

constexpr const char* kToken = "0123456789abcdef0123456789abcdef";

// dsrun --no_ssh for `node`, with `token` as DS_JOB_TOKEN and `marker` in every process's
// environment. DS_TIMEOUT bounds the rendezvous.
std::string nodeCommand(const TempDir& tmp, int node, int port, const std::string& token,
                        const std::string& marker) {
  return fmt::format(
      "cd {} && DS_TEST_MARKER={} DS_JOB_TOKEN={} DS_TIMEOUT=10 exec {} --hostfile {} --no_ssh "
      "--node_rank {} --master_addr 127.0.0.1 --master_port {} --comm_backend gloo hello "
      "--allreduce",
      tmp.path(), marker, token, dsrunPath(), tmp.file("hostfile"), node, port);
}

void writeHostfile(const TempDir& tmp) {
  writeFile(tmp.file("hostfile"), "127.0.0.2 slots=2\n127.0.0.3 slots=2\n");
}

}  // namespace

TEST_CASE("no_ssh launch: --node_rank 0 and 1: ranks 0-1 and 2-3, one rendezvous of 4", "[e2e]") {
  TempDir tmp;
  writeHostfile(tmp);
  std::string marker = uniqueMarker("nossh");
  int port = freePort();
  Background node1(nodeCommand(tmp, 1, port, kToken, marker), tmp.file("out1"));
  Background node0(nodeCommand(tmp, 0, port, kToken, marker), tmp.file("out0"));
  int rc0 = node0.wait(std::chrono::seconds(60));
  int rc1 = node1.wait(std::chrono::seconds(60));
  std::string out0 = node0.output(), out1 = node1.output();
  INFO("node 0:\n" << out0 << "node 1:\n" << out1);
  CHECK(rc0 == 0);
  CHECK(rc1 == 0);
  for (int r = 0; r < 4; ++r) {
    const std::string& mine = r < 2 ? out0 : out1;
    const std::string& other = r < 2 ? out1 : out0;
    std::string hello = fmt::format("[{0}] [rank {0}] hello from ", r);
    std::string vars = fmt::format(
        "RANK={} LOCAL_RANK={} WORLD_SIZE=4 LOCAL_SIZE=2 CROSS_RANK={} CROSS_SIZE=2 "
        "MASTER_ADDR=127.0.0.1 MASTER_PORT={} backend=gloo launcher=dsrun",
        r, r % 2, r / 2, port);
    CHECK(mine.find(hello) != std::string::npos);
    CHECK(mine.find(vars) != std::string::npos);
    CHECK(other.find(hello) == std::string::npos);  // each rank runs on its own node only
    CHECK(mine.find(fmt::format("[{0}] [rank {0}] all 4 ranks joined\n", r)) != std::string::npos);
    CHECK(mine.find(fmt::format("[{0}] [rank {0}] allreduce over gloo ok (sum 10)\n", r)) !=
          std::string::npos);
  }
  CHECK(waitMarkerGone(marker, std::chrono::seconds(15)).empty());
}

// The nodes must share DS_JOB_TOKEN: node 1 with another one is refused by the store that rank 0
// (on node 0) hosts, and both nodes fail within DS_TIMEOUT, nothing left behind.
TEST_CASE("no_ssh launch: a node with another DS_JOB_TOKEN is refused, both nodes fail", "[e2e]") {
  TempDir tmp;
  writeHostfile(tmp);
  std::string marker = uniqueMarker("nossh_token");
  int port = freePort();
  Background node1(nodeCommand(tmp, 1, port, "ffffffffffffffffffffffffffffffff", marker),
                   tmp.file("out1"));
  Background node0(nodeCommand(tmp, 0, port, kToken, marker), tmp.file("out0"));
  int rc0 = node0.wait(std::chrono::seconds(60));
  int rc1 = node1.wait(std::chrono::seconds(60));
  std::string out0 = node0.output(), out1 = node1.output();
  INFO("node 0:\n" << out0 << "node 1:\n" << out1);
  CHECK(rc0 == 1);
  CHECK(rc1 == 1);
  CHECK(out1.find("refused this rank: job token rejected by the store") != std::string::npos);
  CHECK(out0.find("rank(s) that never arrived: 2, 3") != std::string::npos);
  CHECK(out0.find("all 4 ranks joined") == std::string::npos);
  CHECK(waitMarkerGone(marker, std::chrono::seconds(15)).empty());
}
