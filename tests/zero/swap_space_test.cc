// nvme_path checked before any swap file is made: a file system too small for the swap files (a
// small tmpfs) and a read-only one (a read-only bind mount) are refused with the key, the folder
// and the bytes needed, by checkSwapSpace and by the engine that calls it. Needs root (mount);
// SKIPPED otherwise.
#include <sys/mount.h>

#include <catch2/catch.hpp>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "tests/support/skip.h"
#include "tests/support/spawn_ranks.h"
#include "tests/zero/zero_ranks.h"
#include "zero/swap_space.h"
#include "zero/zero_engine.h"

using namespace ds;
using namespace ds::zero;
using ds::test::TempDir;

namespace {

// A mount on dir for the test's lifetime; ok() false (errno kept in why) when mount(2) refused.
class Mount {
 public:
  Mount(const std::string& dir, const char* source, const char* type, unsigned long flags,
        const char* data)
      : dir_(dir) {
    std::filesystem::create_directories(dir);
    ok_ = ::mount(source, dir.c_str(), type, flags, data) == 0;
    if (!ok_) why_ = std::strerror(errno);
  }
  ~Mount() {
    if (ok_) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  bool ok() const { return ok_; }
  const std::string& why() const { return why_; }

 private:
  std::string dir_, why_;
  bool ok_ = false;
};

}  // namespace

TEST_CASE("swap space: an nvme_path too small for the swap files is refused with the bytes",
          "[unit]") {
  TempDir dir;
  const std::string small = dir.file("small");
  Mount tmpfs(small, "tmpfs", "tmpfs", 0, "size=64k");
  if (!tmpfs.ok()) DS_SKIP("mount tmpfs needs root / CAP_SYS_ADMIN: " << tmpfs.why());
  CHECK_NOTHROW(checkSwapSpace("offload_optimizer.nvme_path", small, 16 << 10));
  try {
    checkSwapSpace("offload_optimizer.nvme_path", small, 1 << 20);
    FAIL("no error");
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    CHECK_THAT(what, Catch::Contains("offload_optimizer.nvme_path '" + small + "'"));
    CHECK_THAT(what, Catch::Contains("need 1048576 bytes"));
    CHECK_THAT(what, Catch::Contains("bytes missing"));
  }

  // The engine checks before it creates a file: Ψ = 10250, three fp32 states of >= 40 KiB each.
  const ds::test::ToyModel m(4, 50);
  ZeroOptions z;
  z.stage = 1;
  z.offloadOptimizer.device = "nvme";
  z.offloadOptimizer.nvmePath = small;
  try {
    ZeroEngine engine(m.params, m.L, nullptr, z, ds::test::toyOptimizer());
    FAIL("no error");
  } catch (const ConfigError& e) {
    CHECK_THAT(e.what(), Catch::Contains("offload_optimizer.nvme_path"));
    CHECK_THAT(e.what(), Catch::Contains("bytes missing"));
  }
  CHECK(std::filesystem::is_empty(small));  // nothing left behind

  // Stage 3 parameter swap: the same check under its own key.
  z.stage = 3;
  z.offloadOptimizer.device = "cpu";
  z.offloadParam.device = "nvme";
  z.offloadParam.nvmePath = small;  // the 1 MiB swap block alone does not fit in 64 KiB
  CHECK_THROWS_WITH(ZeroEngine(m.params, m.L, nullptr, z, ds::test::toyOptimizer()),
                    Catch::Contains("offload_param.nvme_path") && Catch::Contains("bytes missing"));
}

TEST_CASE("swap space: an nvme_path on a read-only file system is refused up front", "[unit]") {
  TempDir dir;
  const std::string ro = dir.file("ro");
  Mount bind(ro, dir.path().c_str(), nullptr, MS_BIND, nullptr);
  if (!bind.ok()) DS_SKIP("bind mount needs root / CAP_SYS_ADMIN: " << bind.why());
  Mount readOnly(ro, nullptr, nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY, nullptr);
  if (!readOnly.ok()) DS_SKIP("read-only remount refused: " << readOnly.why());
  CHECK_THROWS_WITH(checkSwapSpace("offload_optimizer.nvme_path", ro, 4096),
                    Catch::Contains("offload_optimizer.nvme_path '" + ro + "'") &&
                        Catch::Contains("4096 bytes needed") &&
                        Catch::Contains("Read-only file system"));
  const ds::test::ToyModel m(2, 8);
  ZeroOptions z;
  z.stage = 2;
  z.offloadOptimizer.device = "nvme";
  z.offloadOptimizer.nvmePath = ro;
  CHECK_THROWS_WITH(
      ZeroEngine(m.params, m.L, nullptr, z, ds::test::toyOptimizer()),
      Catch::Contains("offload_optimizer.nvme_path") && Catch::Contains("Read-only file system"));
}
