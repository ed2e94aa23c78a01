// The mpi backend under real mpirun. A [mpi] case re-runs this test binary under
// `mpirun -np N` with the hidden tag [.mpi_rank]; each MPI rank runs the comm conformance checks
// (tests/comm/conformance_check.h: every collective x dtypes x ops x uneven sizes, reference
// computed by the test) and prints "MPI_RANK_OK <rank>" when it conforms.
// Also: the refusal outside mpirun, and a rank/size mismatch.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "comm/mpi/mpi_backend.h"
#include "comm/process_group.h"
#include "comm/registry.h"
#include "comm/store/hash_store.h"
#include "core/error.h"
#include "tests/comm/conformance_check.h"
#include "tests/support/skip.h"
#include "tests/support/spawn_ranks.h"

using namespace ds;
using namespace ds::comm;
using namespace ds::test::conformance;

namespace {

std::string selfExe() { return std::filesystem::read_symlink("/proc/self/exe").string(); }

std::string mpirun(int n) {
  return fmt::format(
      "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe "
      "--bind-to none --mca oob_tcp_if_include lo --mca btl_tcp_if_include lo "
      "--mca mpi_yield_when_idle 1 -np {} ",
      n);
}

int envInt(const char* k) {
  const char* v = std::getenv(k);
  return v ? std::atoi(v) : -1;
}

}  // namespace

// Runs inside mpirun only (hidden tag); prints a verdict line per rank.
TEST_CASE("mpi rank body: conformance of every collective", "[.mpi_rank]") {
  int rank = envInt("OMPI_COMM_WORLD_RANK"), size = envInt("OMPI_COMM_WORLD_SIZE");
  REQUIRE(rank >= 0);
  ProcessGroup pg(createBackend("mpi", std::make_shared<HashStore>(), rank, size, {}));
  std::string errs = runAll(pg, allDtypes(), allOps(), {0, 1, 5, 1031, 100003});
  // Subgroup of the odd ranks in reverse order, then the world again.
  std::vector<int> members;
  for (int r = size - 1; r >= 0; --r)
    if (r % 2 == 1) members.push_back(r);
  auto sub = pg.newSubgroup(members);
  if ((sub != nullptr) != (rank % 2 == 1)) errs += "subgroup membership wrong\n";
  if (sub) errs += runAll(*sub, {DType::kF32, DType::kBF16}, allOps(), {7, 1031});
  errs += runAll(pg, {DType::kF32}, {ReduceOp::kSum}, {13});
  if (errs.empty()) std::printf("MPI_RANK_OK %d\n", rank);
  else std::printf("MPI_RANK_FAIL %d:\n%s\n", rank, errs.c_str());
  std::fflush(stdout);
  CHECK(errs == "");
}

TEST_CASE("mpi backend: conformance under mpirun at 1-6 ranks", "[mpi]") {
  for (int n : {1, 2, 3, 4, 5, 6}) {
    INFO("np " << n);
    std::string out;
    int rc = ds::test::runCommand(mpirun(n) + selfExe() + " '[.mpi_rank]' 2>&1", &out,
                                  std::chrono::seconds(180));
    INFO(out);
    CHECK(rc == 0);
    for (int r = 0; r < n; ++r) CHECK(out.find(fmt::format("MPI_RANK_OK {}\n", r)) != out.npos);
  }
}

TEST_CASE("mpi backend: refused outside mpirun with a hint to use --launcher openmpi", "[unit]") {
  if (std::getenv("OMPI_COMM_WORLD_SIZE"))
    DS_SKIP("this process runs under mpirun (OMPI_COMM_WORLD_SIZE is set)");
  try {
    createBackend("mpi", std::make_shared<HashStore>(), 0, 2, {});
    FAIL("expected a ConfigError");
  } catch (const ConfigError& e) {
    CHECK_THAT(e.what(), Catch::Contains("--launcher openmpi"));
  }
}

TEST_CASE("mpi rank body: a rank/size that disagrees with MPI is refused", "[.mpi_mismatch]") {
  int size = envInt("OMPI_COMM_WORLD_SIZE");
  try {
    createBackend("mpi", std::make_shared<HashStore>(), 0, size + 1, {});
    std::printf("MISMATCH_ACCEPTED\n");
  } catch (const ConfigError& e) {
    std::printf("MISMATCH_REFUSED %s\n", e.what());
  }
  std::fflush(stdout);
}

TEST_CASE("mpi backend: rank environment disagreeing with MPI is a clear error", "[mpi]") {
  std::string out;
  int rc = ds::test::runCommand(mpirun(2) + selfExe() + " '[.mpi_mismatch]' 2>&1", &out,
                                std::chrono::seconds(120));
  INFO(out);
  CHECK(rc == 0);
  CHECK(out.find("MISMATCH_ACCEPTED") == out.npos);
  CHECK(out.find("the rank environment says rank 0 of 3") != out.npos);
}
