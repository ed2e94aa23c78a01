// Hidden benchmark ([.bench], never run by ctest): busbw of the gloo backend's allreduce,
// reduce_scatter and allgather at 1, 16 and 128 MiB on 2 and 4 forked ranks over loopback TCP.
// Run: build-e/tests/test_comm_gloo "[.bench]"; figures go to stdout (bench/results/ has a copy).
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <vector>

#include "comm/gloo/gloo_backend.h"
#include "comm/process_group.h"
#include "comm/store/tcp_store.h"
#include "tests/comm/conformance_procs.h"
#include "tests/support/spawn_ranks.h"

using namespace ds;
using namespace ds::comm;

namespace {

double timeIt(ProcessGroup& pg, int iters, const std::function<WorkPtr()>& op) {
  for (int i = 0; i < 2; ++i) op()->wait();
  pg.barrier()->wait();
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) op()->wait();
  pg.barrier()->wait();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
}

}  // namespace

TEST_CASE("gloo collective bandwidth", "[.bench]") {
  for (int n : {2, 4}) {
    int port = ds::test::freePort();
    auto res = ds::test::conformance::forkRanks(
        n,
        [&](int r) -> std::string {
          TcpStoreOptions so;
          so.port = port;
          so.isServer = r == 0;
          so.token = "bench";
          GroupOptions go;
          go.timeout = std::chrono::seconds(120);
          ProcessGroup pg(createGlooBackend(std::make_shared<TcpStore>(so), r, n, go));
          for (size_t mib : {1, 16, 128}) {
            size_t count = mib << 18;  // fp32 elements
            int iters = mib == 1 ? 40 : (mib == 16 ? 10 : 3);
            std::vector<float> a(count, 1.0f), b(count, 0.0f);
            std::vector<size_t> counts(n, count / n);
            double bytes = double(count) * 4;
            double ar = timeIt(pg, iters, [&] { return pg.allreduce(view(a.data(), count)); });
            double rs = timeIt(pg, iters, [&] {
              return pg.reduceScatter(view(a.data(), count), view(b.data(), count / n), counts);
            });
            double ag = timeIt(pg, iters, [&] {
              return pg.allgather(view(b.data(), count / n), view(a.data(), count), counts);
            });
            if (r == 0) {
              double f = double(n - 1) / n;
              std::printf(
                  "np=%d %4zu MiB  allreduce %8.2f ms busbw %5.2f GB/s | reduce_scatter "
                  "%8.2f ms busbw %5.2f GB/s | allgather %8.2f ms busbw %5.2f GB/s\n",
                  n, mib, ar * 1e3, bytes / ar * 2 * f / 1e9, rs * 1e3, bytes / rs * f / 1e9,
                  ag * 1e3, bytes / ag * f / 1e9);
              std::fflush(stdout);
            }
          }
          return "";
        },
        std::chrono::seconds(300));
    CHECK(ds::test::conformance::failures(res) == "");
  }
}
