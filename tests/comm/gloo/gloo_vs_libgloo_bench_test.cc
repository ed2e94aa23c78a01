// Hidden benchmark ([.bench], never run by ctest): our gloo backend against libgloo's own
// algorithms (as bench/raw_gloo.cc runs them) in the same forked processes, call by call: ours,
// raw, ours, raw, ... so load drift on a shared VM hits both alike; prints the median and
// quartiles of each side's per-call time on rank 0 (each call ends with the slowest rank's data,
// so rank 0's time covers the collective). 1 MiB fp32 by default (DS_BENCH_BYTES); DS_BENCH_BLOCK=k
// alternates blocks of k calls instead (each block's mean per call is one sample), as
// bench/comm_bench.sh's back-to-back loops do.
// Run: build/tests/test_comm_gloo "[.bench]" -c "ours vs libgloo"
#include <catch2/catch.hpp>

#include <gloo/allgather.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/reduce_scatter.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "comm/gloo/gloo_backend.h"
#include "comm/process_group.h"
#include "comm/store/tcp_store.h"
#include "tests/comm/conformance_procs.h"
#include "tests/support/spawn_ranks.h"

using namespace ds;
using namespace ds::comm;

namespace {

using Clock = std::chrono::steady_clock;

std::string quartiles(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  auto q = [&](double f) { return v[size_t(f * double(v.size() - 1))] * 1e6; };
  return fmt::format("p25 {:6.0f} median {:6.0f} p75 {:6.0f} p99 {:6.0f} max {:6.0f} us", q(0.25),
                     q(0.5), q(0.75), q(0.99), q(1.0));
}

}  // namespace

TEST_CASE("ours vs libgloo, interleaved call by call", "[.bench]") {
  const char* env = std::getenv("DS_BENCH_BYTES");
  const size_t count = (env ? std::strtoull(env, nullptr, 10) : (size_t{1} << 20)) / 4;
  const char* blockEnv = std::getenv("DS_BENCH_BLOCK");
  const int block = std::max(1, blockEnv ? std::atoi(blockEnv) : 1);
  const int iters = std::max(300, 10 * block);
  for (int n : {2, 4}) {
    int port = ds::test::freePort();
    ds::test::TempDir dir;
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
          ::gloo::transport::tcp::attr attr;
          attr.hostname = "127.0.0.1";
          attr.ai_family = AF_INET;
          auto dev = ::gloo::transport::tcp::CreateDevice(attr);
          ::gloo::rendezvous::FileStore fs(dir.path());
          auto ctx = std::make_shared<::gloo::rendezvous::Context>(r, n);
          ctx->setTimeout(std::chrono::seconds(120));
          ctx->connectFullMesh(fs, dev);
          std::vector<float> a(count, 1.f), b(count, 0.f), raw(count, 1.f);
          std::vector<size_t> counts(n, count / n);
          for (size_t i = 0; i < count % n; ++i) ++counts[i];
          std::vector<int> recvElems(counts.begin(), counts.end());
          ::gloo::AllreduceRingChunked<float> ar(ctx, {raw.data()}, int(count));
          ::gloo::ReduceScatterHalvingDoubling<float> rs(ctx, {raw.data()}, int(count), recvElems);
          struct Case {
            const char* name;
            std::function<void()> ours, libgloo;
          };
          std::vector<Case> cases;
          if (n == 2) {
            cases.push_back({"allreduce", [&] { pg.allreduce(view(a.data(), count))->wait(); },
                             [&] { ar.run(); }});
          }
          cases.push_back(
              {"reduce_scatter",
               [&] {
                 pg.reduceScatter(view(a.data(), count), view(b.data(), counts[r]), counts)->wait();
               },
               [&] { rs.run(); }});
          const size_t even = count / n;  // gloo's allgather needs equal blocks
          cases.push_back({"allgather",
                           [&] {
                             pg.allgather(view(b.data(), even), view(a.data(), even * n),
                                          std::vector<size_t>(n, even))
                                 ->wait();
                           },
                           [&] {
                             ::gloo::AllgatherOptions o(ctx);
                             o.setInput(raw.data() + r * even, even);
                             o.setOutput(raw.data(), even * n);
                             ::gloo::allgather(o);
                           }});
          for (auto& c : cases) {
            std::vector<double> tOurs, tRaw;
            for (int i = 0; i < 3; ++i) {
              c.ours();
              c.libgloo();
            }
            // Blocks of `block` calls of one side, then of the other (the mean per call of each
            // block is one sample); block 1 alternates single calls.
            for (int i = 0; i < iters / block; ++i) {
              for (int side = 0; side < 2; ++side) {
                auto t0 = Clock::now();
                for (int k = 0; k < block; ++k) side == 0 ? c.ours() : c.libgloo();
                double t = std::chrono::duration<double>(Clock::now() - t0).count() / block;
                (side == 0 ? tOurs : tRaw).push_back(t);
              }
            }
            if (r == 0) {
              std::printf("n=%d %-15s %zu B  ours %s | libgloo %s\n", n, c.name, count * 4,
                          quartiles(tOurs).c_str(), quartiles(tRaw).c_str());
              std::fflush(stdout);
            }
          }
          pg.barrier()->wait();
          return "";
        },
        std::chrono::seconds(600));
    CHECK(ds::test::conformance::failures(res) == "");
  }
}
