// MappedFloats: the file-backed float array stage 3 keeps its gradient partition in when the
// optimizer is offloaded to nvme. Starts zero, keeps what is written, zero() clears it, leaves no
// name in the folder (nothing to redirect, nothing left after a crash), and a folder it cannot use
// is refused naming the key and the folder.
#include <catch2/catch.hpp>

#include <filesystem>

#include "core/error.h"
#include "tests/support/spawn_ranks.h"
#include "zero/mapped_floats.h"

using ds::test::TempDir;
using ds::zero::MappedFloats;

TEST_CASE("mapped floats: zeros, writes kept, zero() clears, no name left in the folder",
          "[unit]") {
  TempDir dir;
  const size_t count = (3u << 20) + 5;  // several pages and a partial one
  MappedFloats floats(dir.path(), count, "gradient partition", "offload_optimizer.nvme_path");
  REQUIRE(floats.size() == count);
  for (size_t i = 0; i < count; i += 4099) CHECK(floats.data()[i] == 0.f);
  for (size_t i = 0; i < count; ++i) floats.data()[i] = float(i % 1000) + 0.5f;
  bool kept = true;
  for (size_t i = 0; i < count; ++i) kept = kept && floats.data()[i] == float(i % 1000) + 0.5f;
  CHECK(kept);
  floats.zero();
  bool cleared = true;
  for (size_t i = 0; i < count; ++i) cleared = cleared && floats.data()[i] == 0.f;
  CHECK(cleared);
  floats.data()[count - 1] = 7.f;  // still writable after the holes were punched
  CHECK(floats.data()[count - 1] == 7.f);
  CHECK(std::filesystem::is_empty(dir.path()));
}

TEST_CASE("mapped floats: a folder that does not exist is refused naming the key", "[unit]") {
  TempDir dir;
  const std::string missing = dir.file("no/such/folder");
  try {
    MappedFloats floats(missing, 16, "gradient partition", "offload_optimizer.nvme_path");
    FAIL("no error");
  } catch (const ds::ConfigError& e) {
    CHECK_THAT(e.what(), Catch::Contains("offload_optimizer.nvme_path"));
    CHECK_THAT(e.what(), Catch::Contains(missing));
    CHECK_THAT(e.what(), Catch::Contains("gradient partition"));
  }
}
