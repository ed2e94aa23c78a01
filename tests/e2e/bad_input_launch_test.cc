// dsrun refusals that must come before any rank runs (issue 14 item 4), with the real binary: a
// --bind_core_list naming cores this host does not have, and --enable_each_rank_log on a real
// read-only mount (private mount namespace; root ignores permission bits). Each asserts the exit
// status, the message, that the rank program never ran (it would create a marker file) and that
// nothing was written.
#include <sched.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "ds/config.h"
#include "tests/support/skip.h"
#include "tests/support/spawn_ranks.h"

using ds::test::runCommand;
using ds::test::TempDir;
namespace fs = std::filesystem;

namespace {

std::string dsrun() { return std::string(DS_BINARY_DIR) + "/dsrun"; }

// A rank program that leaves a marker file when it runs.
std::string marking(const TempDir& dir) { return "sh -c 'touch " + dir.file("ran") + ".$RANK'"; }

std::vector<int> allowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  REQUIRE(::sched_getaffinity(0, sizeof(set), &set) == 0);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

bool anyMarker(const TempDir& dir) {
  for (const auto& e : fs::directory_iterator(dir.path()))
    if (e.path().filename().string().rfind("ran.", 0) == 0) return true;
  return false;
}

}  // namespace

TEST_CASE("dsrun local: --bind_core_list naming missing cores fails before any rank starts",
          "[e2e]") {
  TempDir dir;
  const std::vector<int> allowed = allowedCpus();
  REQUIRE_FALSE(allowed.empty());
  const int last = allowed.back();
  const std::string list = "0-" + std::to_string(last + 2);  // two cores past the last one
  std::string out;
  const int rc =
      runCommand("cd " + dir.path() + " && " + dsrun() + " --num_gpus 2 --bind_core_list " + list +
                     " " + marking(dir) + " 2>&1",
                 &out);
  INFO(out);
  CHECK(rc == 2);
  CHECK(out.find("--bind_core_list " + list + ": cores " + std::to_string(last + 1) + "-" +
                 std::to_string(last + 2) + " are not available on host ") != std::string::npos);
  CHECK(out.find("(this process may run on cores ") != std::string::npos);
  CHECK_FALSE(anyMarker(dir));  // before: rank 0 got the cores that exist and started
  // The cores that exist are accepted.
  CHECK(runCommand("cd " + dir.path() + " && " + dsrun() + " --num_gpus 1 --bind_core_list " +
                       std::to_string(allowed.front()) + " " + marking(dir) + " 2>&1",
                   &out) == 0);
  CHECK(fs::exists(dir.file("ran.0")));
}

TEST_CASE("dsrun local: a rank log folder on a read-only mount fails before any rank starts",
          "[e2e]") {
  TempDir dir;
  const std::string ro = dir.file("logs");
  fs::create_directory(ro);
  std::string out;
  const std::string mount = "unshare -m sh -c 'mount --bind " + ro + " " + ro +
                            " && mount -o remount,bind,ro " + ro + " " + ro;
  if (runCommand(mount + " && ! touch " + ro + "/probe' 2>&1", &out) != 0 ||
      fs::exists(ro + "/probe"))
    DS_SKIP("cannot make a read-only bind mount here (unshare -m): " << out);
  const int rc = runCommand(mount + " && cd " + dir.path() + " && exec " + dsrun() +
                                " --num_gpus 2 --enable_each_rank_log " + ro + " " +
                                "sh -c \"touch " + dir.file("ran") + ".\\$RANK\"' 2>&1",
                            &out);
  INFO(out);
  CHECK(rc != 0);
  CHECK(out.find(ro) != std::string::npos);
  CHECK(out.find("Read-only file system") != std::string::npos);
  CHECK_FALSE(anyMarker(dir));
  CHECK(fs::is_empty(ro));
}
