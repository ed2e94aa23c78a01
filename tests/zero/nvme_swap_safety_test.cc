// The NVMe swap files live at predictable names under nvme_path
// (zero_rank<r>_pid<pid>_<state>.swp): a symlink planted there, or another user's file, must stop
// the engine with an error naming the path, and the link's target must stay untouched (before,
// training wrote through the link and diverged). Our own leftover of a killed run is replaced.
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <string>

#include "core/error.h"
#include "tests/support/skip.h"
#include "tests/support/spawn_ranks.h"
#include "zero/async_file.h"
#include "zero/optimizer_partition.h"
#include "zero/param_swap.h"

using namespace ds;
using namespace ds::zero;
using Catch::Contains;

namespace {

std::string swapName(const std::string& dir, int rank, const std::string& state) {
  return fmt::format("{}/zero_rank{}_pid{}_{}.swp", dir, rank, ::getpid(), state);
}

OffloadOptions nvmeAt(const std::string& dir) {
  OffloadOptions off;
  off.device = "nvme";
  off.nvmePath = dir;
  return off;
}

bool exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

}  // namespace

TEST_CASE("nvme swap: a symlink planted at an optimizer state's swap name is refused", "[unit]") {
  ds::test::TempDir dir, elsewhere;
  const std::string victim = elsewhere.file("victim");
  ds::test::writeFile(victim, "precious\n");
  const std::string planted = swapName(dir.path(), 3, "exp_avg");
  REQUIRE(::symlink(victim.c_str(), planted.c_str()) == 0);
  CHECK_THROWS_AS(
      OptimizerPartition(4096, OptimizerOptions{}, nvmeAt(dir.path()), 1024, nullptr, 3),
      ConfigError);
  CHECK_THROWS_WITH(
      OptimizerPartition(4096, OptimizerOptions{}, nvmeAt(dir.path()), 1024, nullptr, 3),
      Contains("nvme swap file " + planted) && Contains("symbolic link") && Contains(victim));
  CHECK(ds::test::readFile(victim) == "precious\n");
  CHECK(exists(planted));                                // left for the user to look at
  CHECK_FALSE(exists(swapName(dir.path(), 3, "fp32")));  // what was made first is cleaned up
}

TEST_CASE("nvme swap: a symlink planted at the param swap name is refused", "[unit]") {
  ds::test::TempDir dir, elsewhere;
  const std::string victim = elsewhere.file("victim");
  ds::test::writeFile(victim, "precious\n");
  const std::string planted = swapName(dir.path(), 0, "params");
  REQUIRE(::symlink(victim.c_str(), planted.c_str()) == 0);
  CHECK_THROWS_WITH(ParamSwap(dir.path(), 0, 1 << 20),
                    Contains(planted) && Contains("symbolic link"));
  CHECK(ds::test::readFile(victim) == "precious\n");
}

TEST_CASE("nvme swap: another user's file at the swap name is refused", "[unit]") {
  if (::geteuid() != 0) DS_SKIP("needs root to make a file owned by another user (nobody)");
  ds::test::TempDir dir;
  const std::string planted = swapName(dir.path(), 0, "params");
  ds::test::writeFile(planted, "theirs\n");
  REQUIRE(::chown(planted.c_str(), 65534, 65534) == 0);
  CHECK_THROWS_WITH(ParamSwap(dir.path(), 0, 1 << 20),
                    Contains(planted) && Contains("owned by uid 65534"));
  CHECK(ds::test::readFile(planted) == "theirs\n");
}

TEST_CASE("nvme swap: our own leftover at the swap name is replaced and not left behind",
          "[unit]") {
  ds::test::TempDir dir;
  const std::string left = swapName(dir.path(), 0, "params");
  ds::test::writeFile(left, "a killed run's swap file\n");
  {
    ParamSwap swap(dir.path(), 0, 1 << 20);
    std::vector<float> in(1000, 1.5f), out(1000);
    swap.write(4096, in.size() * sizeof(float), in.data());
    swap.read(4096, out.size() * sizeof(float), out.data());
    CHECK(out == in);
    CHECK_FALSE(exists(left));  // anonymous once open
  }
  CHECK_FALSE(exists(left));
}
