// Raw libgloo peer for bench/comm_bench.sh: the library's own algorithms, no dsrun comm layer.
// allreduce = AllreduceRingChunked (the correct, fastest old-style ring here; the new-API ring
// stalls at 4+ ranks, feasibility §2.4), reduce_scatter = ReduceScatterHalvingDoubling (gloo has
// no other), allgather = the new-API allgather. Started by dsrun (RANK, WORLD_SIZE); rendezvous
// through gloo's FileStore in the directory given as argv[1]. Sizes (bytes) follow.
#include <gloo/allgather.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier_all_to_all.h>
#include <gloo/reduce_scatter.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench/raw_timing.h"
#include "core/core_knobs.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: bench_raw_gloo STORE_DIR BYTES...\n");
    return 2;
  }
  const int n = static_cast<int>(ds::knobInt(ds::knobs::kWorldSize).value_or(1));
  const int rank = static_cast<int>(ds::knobIntIn(ds::knobs::kRank, 0, n - 1).value_or(0));
  std::vector<size_t> sizes;  // dsrun appends --local_rank=N: skip options
  for (int a = 2; a < argc; ++a)
    if (argv[a][0] != '-') sizes.push_back(std::strtoull(argv[a], nullptr, 10) / 4 * 4);
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  attr.ai_family = AF_INET;
  auto dev = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore store(argv[1]);
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, n);
  ctx->setTimeout(std::chrono::seconds(120));
  ctx->connectFullMesh(store, dev);

  std::vector<float> one(1);
  gloo::BarrierAllToAll barrierAlg(ctx);
  auto barrier = [&] { barrierAlg.run(); };
  auto maxOf = [&](double x) {
    std::vector<float> v(n, 0.f);
    float mine = static_cast<float>(x);
    gloo::AllgatherOptions o(ctx);
    o.setInput(&mine, 1);
    o.setOutput(v.data(), v.size());
    gloo::allgather(o);
    return static_cast<double>(*std::max_element(v.begin(), v.end()));
  };
  if (rank == 0) ds::bench::printHeader("raw libgloo", n);
  for (const char* op : {"allreduce", "reduce_scatter", "allgather"}) {
    for (size_t bytes : sizes) {
      size_t count = bytes / 4;
      std::vector<float> buf(count, 1.f), out(count, 0.f);
      std::function<void()> run;
      std::unique_ptr<gloo::AllreduceRingChunked<float>> ar;
      std::unique_ptr<gloo::ReduceScatterHalvingDoubling<float>> rs;
      std::vector<int> recvElems(n, static_cast<int>(count / n));
      for (size_t r = 0; r < count % n; ++r) ++recvElems[r];
      if (std::string(op) == "allreduce") {
        ar = std::make_unique<gloo::AllreduceRingChunked<float>>(
            ctx, std::vector<float*>{buf.data()}, static_cast<int>(count));
        run = [&] { ar->run(); };
      } else if (std::string(op) == "reduce_scatter") {
        rs = std::make_unique<gloo::ReduceScatterHalvingDoubling<float>>(
            ctx, std::vector<float*>{buf.data()}, static_cast<int>(count), recvElems);
        run = [&] { rs->run(); };
      } else {
        if (count % n) count -= count % n;  // gloo's allgather needs equal blocks
        run = [&] {
          gloo::AllgatherOptions o(ctx);
          o.setInput(buf.data(), count / n);
          o.setOutput(out.data(), count);
          gloo::allgather(o);
        };
      }
      auto row = ds::bench::timeCollective(run, maxOf, barrier, ds::bench::targetSeconds());
      if (rank == 0) ds::bench::printRow(op, count * 4, n, row);
    }
  }
  return 0;
}
