// End to end through the real binaries: `dsrun --num_gpus 2 --comm_backend gloo <dsrt>
// comm-bench` (on one host: the shared-memory path, and with DS_COMM_SHM=0 gloo's TCP) and the
// same with `--launcher openmpi --comm_backend mpi` (real mpirun; with DS_MPI_SHM_MIN_BYTES=1
// every collective of the mpi backend through shared memory), at a few small sizes. Every row of
// rank 0's table must say "ok" (the benchmark checked the result against values it computed) and
// the table must have one row per (collective, size).
#include <catch2/catch.hpp>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "ds/config.h"
#include "tests/support/skip.h"
#include "tests/support/spawn_ranks.h"

using ds::test::runCommand;

namespace {

std::string bin(const std::string& name) { return std::string(DS_BINARY_DIR) + "/" + name; }

const std::vector<std::string> kOps{"allreduce", "reduce_scatter", "allgather", "broadcast"};
constexpr int kSizes = 3;  // --sizes below
const char* kBenchArgs = " comm-bench --sizes 8,4K,100K --warmup 1 --target_seconds 0.01";

// The table rows (lines starting with a collective's name, after dsrun's "[rank] " prefix when
// there is one), split into fields.
std::vector<std::vector<std::string>> tableRows(const std::string& out) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::vector<std::string> f;
    for (std::string w; ls >> w;) f.push_back(w);
    if (!f.empty() && f[0].front() == '[' && f[0].back() == ']') f.erase(f.begin());  // "[0] "
    if (f.size() == 8 && std::find(kOps.begin(), kOps.end(), f[0]) != kOps.end()) rows.push_back(f);
  }
  return rows;
}

void checkTable(const std::string& out, const std::string& backend) {
  INFO(out);
  CHECK_THAT(out, Catch::Contains("# dsrt comm-bench: backend " + backend + ", 2 ranks"));
  auto rows = tableRows(out);
  CHECK(rows.size() == kOps.size() * kSizes);
  for (const auto& f : rows) {
    INFO(f[0] << " " << f[1] << " bytes");
    CHECK(f[7] == "ok");
  }
}

}  // namespace

TEST_CASE("e2e: dsrun --num_gpus 2 --comm_backend gloo dsrt comm-bench checks every row", "[e2e]") {
  std::string out;
  int rc = runCommand(bin("dsrun") + " --num_gpus 2 --master_port " +
                          std::to_string(ds::test::freePort()) + " --comm_backend gloo " +
                          bin("dsrt") + kBenchArgs + " 2>&1",
                      &out, std::chrono::seconds(120));
  INFO(out);
  CHECK(rc == 0);
  checkTable(out, "gloo");
}

TEST_CASE("e2e: dsrun --launcher openmpi --comm_backend mpi dsrt comm-bench checks every row",
          "[e2e]") {
#if DS_HAVE_MPI
  std::string out;
  int rc =
      runCommand("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 " + bin("dsrun") +
                     " --num_gpus 2 --master_port " + std::to_string(ds::test::freePort()) +
                     " --launcher openmpi --comm_backend mpi --launcher_args '--mca btl self,tcp "
                     "--mca btl_tcp_if_include lo --mca oob_tcp_if_include lo --bind-to none "
                     "--mca mpi_yield_when_idle 1' " +
                     bin("dsrt") + kBenchArgs + " 2>&1",
                 &out, std::chrono::seconds(120));
  INFO(out);
  CHECK(rc == 0);
  checkTable(out, "mpi");
#else
  DS_SKIP("this build has no mpi backend (libopenmpi-dev)");
#endif
}

TEST_CASE("e2e: comm-bench rows check on gloo over TCP (DS_COMM_SHM=0)", "[e2e]") {
  std::string out;
  int rc = runCommand("DS_COMM_SHM=0 " + bin("dsrun") + " --num_gpus 2 --master_port " +
                          std::to_string(ds::test::freePort()) + " --comm_backend gloo " +
                          bin("dsrt") + kBenchArgs + " 2>&1",
                      &out, std::chrono::seconds(120));
  INFO(out);
  CHECK(rc == 0);
  checkTable(out, "gloo");
}

TEST_CASE("e2e: the mpi backend's collectives through shared memory check every row", "[e2e]") {
#if DS_HAVE_MPI
  std::string out;
  int rc = runCommand(
      "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
      "DS_MPI_SHM_MIN_BYTES=1 " +
          bin("dsrun") + " --num_gpus 2 --master_port " + std::to_string(ds::test::freePort()) +
          " --launcher openmpi --comm_backend mpi --launcher_args '--mca btl self,tcp "
          "--mca btl_tcp_if_include lo --mca oob_tcp_if_include lo --bind-to none "
          "--mca mpi_yield_when_idle 1' " +
          bin("dsrt") + kBenchArgs + " 2>&1",
      &out, std::chrono::seconds(120));
  INFO(out);
  CHECK(rc == 0);
  checkTable(out, "mpi");
#else
  DS_SKIP("this build has no mpi backend (libopenmpi-dev)");
#endif
}

TEST_CASE("e2e: comm-bench rows check with private host buffers (CMA), and a bad value refused",
          "[e2e]") {
  // 100K is past the single-copy threshold only when it is lowered: 4 KiB here.
  std::string out;
  int rc =
      runCommand("DS_COMM_SHM_CMA_MIN_BYTES=4096 " + bin("dsrun") + " --num_gpus 2 --master_port " +
                     std::to_string(ds::test::freePort()) + " --comm_backend gloo " + bin("dsrt") +
                     kBenchArgs + " --host_buffers private 2>&1",
                 &out, std::chrono::seconds(120));
  INFO(out);
  CHECK(rc == 0);
  checkTable(out, "gloo");
  CHECK_THAT(out, Catch::Contains("registered buffers used in place through a mapping"));

  rc = runCommand(bin("dsrt") + " comm-bench --host_buffers shard 2>&1", &out,
                  std::chrono::seconds(30));
  INFO(out);
  CHECK(rc == 2);
  CHECK_THAT(out, Catch::Contains("--host_buffers"));
  CHECK_THAT(out, Catch::Contains("shared"));
}
