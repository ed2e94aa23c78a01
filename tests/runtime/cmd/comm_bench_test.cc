// comm-bench: the size sweep, and a real run over the gloo backend on thread ranks whose every
// row must be checked and correct (including sizes that do not divide by the world size); on a
// GPU ([gpu]) the same over nccl with device buffers at world size 1.
#include <catch2/catch.hpp>

#include "comm/registry.h"
#include "comm/store/hash_store.h"
#include "core/error.h"
#include "ds/config.h"
#include "runtime/cmd/comm_bench.h"
#include "runtime/cmd/comm_bench_buffer.h"
#if DS_HAVE_NCCL
#include "comm/nccl/nccl_backend.h"
#endif
#include "tests/support/skip.h"
#include "tests/support/spawn_ranks.h"

using namespace ds;
using namespace ds::runtime;

TEST_CASE("comm-bench: size sweep multiplies by the factor and always ends at max", "[unit]") {
  CHECK(sizeSweep(8, 256, 4) == std::vector<size_t>{8, 32, 128, 256});
  CHECK(sizeSweep(8, 8, 2) == std::vector<size_t>{8});
  CHECK_THROWS_AS(sizeSweep(0, 8, 2), ConfigError);
  CHECK_THROWS_WITH(sizeSweep(16, 8, 2), Catch::Contains("min_bytes <= max_bytes"));
}

TEST_CASE("comm-bench: every collective checked correct on gloo at 1-3 ranks", "[multirank]") {
  for (int n = 1; n <= 3; ++n) {
    auto store = std::make_shared<comm::HashStore>();
    std::vector<std::vector<CommBenchRow>> rows(n);
    ds::test::runRanks(n, [&](int r) {
      comm::ProcessGroup pg(comm::createBackend("gloo", store, r, n, {}));
      CommBenchOptions o;
      o.sizes = {8, 4 * 1001, 1 << 16};
      o.warmup = 1;
      o.targetSeconds = 0.01;
      rows[r] = runCommBench(pg, o);
    });
    for (int r = 0; r < n; ++r) {
      REQUIRE(rows[r].size() == 12);
      for (const auto& row : rows[r]) {
        INFO(row.op << " " << row.bytes << " world " << n);
        CHECK(row.checked);
        CHECK(row.correct);
        CHECK(row.iters >= 3);
        CHECK(row.seconds > 0);
      }
    }
    std::string table = formatCommBench(rows[0], "gloo", n);
    CHECK_THAT(table, Catch::Contains("reduce_scatter") && Catch::Contains("busbw"));
  }
}

TEST_CASE("comm-bench: buffers live where the backend wants them", "[unit]") {
  BenchBuffer host(5, comm::bufferDevice("gloo"));
  CHECK(host.view().device == comm::Device::kCpu);
  CHECK(host.view().data == host.host().data());
  CHECK(host.view().count == 5);
  CHECK(comm::bufferDevice("mpi") == comm::Device::kCpu);
  CHECK(comm::bufferDevice("nccl") == comm::Device::kCuda);
#if !DS_HAVE_NCCL
  CHECK_THROWS_WITH(BenchBuffer(5, comm::Device::kCuda), Catch::Contains("without CUDA"));
#endif
}

TEST_CASE("comm-bench: every collective checked correct on nccl device buffers, world 1", "[gpu]") {
#if DS_HAVE_NCCL
  if (comm::cudaDeviceCount() == 0) DS_SKIP("no CUDA device");
  comm::ProcessGroup pg(comm::createBackend("nccl", std::make_shared<comm::HashStore>(), 0, 1, {}));
  CommBenchOptions o;
  o.sizes = {8, 4 * 1001, 1 << 20};
  o.warmup = 1;
  o.targetSeconds = 0.01;
  auto rows = runCommBench(pg, o);
  REQUIRE(rows.size() == 12);
  for (const auto& row : rows) {
    INFO(row.op << " " << row.bytes);
    CHECK(row.checked);
    CHECK(row.correct);
  }
#else
  DS_SKIP("this build has no nccl (configure with -DDS_WITH_NCCL=ON)");
#endif
}
