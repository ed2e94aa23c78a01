// Partitioned construction (DeepSpeed's zero.Init): at stage 3 a rank reads only its shard of the
// parameters from the ParamSource and never holds the full model while filling it. Measured two
// ways on 2 thread ranks: what each rank asked the source for (disjoint shards that together
// cover the model once, none anywhere near the model's size), and the process's peak RSS
// (VmHWM, reset through /proc/self/clear_refs) while both ranks fill their engines, against the
// full model's bytes, with the old full-vector path measured the same way as the control.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

#include "comm/process_group.h"
#include "comm/registry.h"
#include "comm/store/hash_store.h"
#include "tests/support/skip.h"
#include "tests/support/spawn_ranks.h"
#include "zero/zero_engine.h"

using namespace ds;
using namespace ds::zero;

namespace {

// kB of one field of /proc/self/status (VmHWM, VmRSS); -1 when absent.
long statusKb(const char* field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  const size_t n = std::strlen(field);
  while (std::getline(f, line))
    if (line.compare(0, n, field) == 0 && line.size() > n && line[n] == ':')
      return std::atol(line.c_str() + n + 1);
  return -1;
}

// Resets VmHWM to the current RSS (Linux >= 4.0); false where the kernel refuses.
bool resetPeakRss() {
  std::ofstream f("/proc/self/clear_refs");
  f << "5";
  f.flush();
  return bool(f);
}

float valueAt(size_t i) { return float(i % 977) * 1e-3f - 0.4f; }

struct Request {
  size_t offset, size;
};

struct RankResult {
  std::vector<Request> requests;
  size_t largest = 0, total = 0;
  std::vector<float> params;  // getParams after the fill
};

struct Measured {
  std::vector<RankResult> ranks;
  long deltaKb = 0;  // peak RSS during the fill minus RSS before it (whole process)
};

std::vector<ParamInfo> model(size_t blocks, size_t width) {
  std::vector<ParamInfo> ps;
  for (size_t b = 0; b < blocks; ++b) {
    ps.push_back({"w" + std::to_string(b), {}, width, {int(b)}, true});
    ps.push_back({"b" + std::to_string(b), {}, 1001, {int(b)}, false});
  }
  return ps;
}

// Both ranks build a stage-3 engine, then (between barriers, peak RSS reset) fill it from a
// recording source (fullVector false) or from a full vector per rank, the old path.
Measured fill(const std::vector<ParamInfo>& ps, bool fullVector) {
  const int world = 2;
  auto store = std::make_shared<comm::HashStore>();
  Measured out;
  out.ranks.resize(world);
  long before = 0, peak = 0;
  test::runRanks(world, [&](int r) {
    comm::GroupOptions go;
    go.backend = "gloo";
    go.timeout = std::chrono::seconds(60);
    comm::ProcessGroup pg(comm::createBackend("gloo", store, r, world, go));
    ZeroOptions z;
    z.stage = 3;
    z.paramPersistenceThreshold = 0;
    ZeroEngine eng(ps, int(ps.size() / 2), &pg, z, OptimizerOptions{});
    RankResult& mine = out.ranks[size_t(r)];
    pg.barrier()->wait();
    if (r == 0) {
      before = statusKb("VmRSS");
      if (!resetPeakRss()) before = -1;
    }
    pg.barrier()->wait();
    if (fullVector) {
      std::vector<float> full(eng.numel());
      for (size_t i = 0; i < full.size(); ++i) full[i] = valueAt(i);
      eng.setParams(full.data());
    } else {
      eng.setParamsFrom([&mine](size_t offset, size_t size, float* values) {
        mine.requests.push_back({offset, size});
        mine.largest = std::max(mine.largest, size);
        mine.total += size;
        for (size_t i = 0; i < size; ++i) values[i] = valueAt(offset + i);
      });
    }
    pg.barrier()->wait();
    if (r == 0) peak = statusKb("VmHWM");
    pg.barrier()->wait();
    mine.params.resize(eng.numel());
    eng.getParams(mine.params.data());
  });
  out.deltaKb = before < 0 ? -1 : peak - before;
  return out;
}

}  // namespace

TEST_CASE("stage 3: each rank reads only its shard from the source, never the full model",
          "[multirank]") {
  const auto ps = model(4, 100003);  // odd sizes: the last chunk of each param is short
  size_t numel = 0;
  for (const auto& p : ps) numel += p.numel;
  const Measured m = fill(ps, false);
  std::vector<Request> all;
  for (size_t r = 0; r < m.ranks.size(); ++r) {
    const RankResult& rank = m.ranks[r];
    INFO("rank " << r << ": asked for " << rank.total << " of " << numel << " elements, largest "
                 << rank.largest);
    CHECK(rank.total <= (numel + ps.size()) / 2 + ps.size());  // its shard, about half
    CHECK(rank.largest <= TrainingEngine::kParamSourcePiece);
    CHECK(rank.largest < numel / 2);
    all.insert(all.end(), rank.requests.begin(), rank.requests.end());
    // the parameters are right on every rank (gathered from the shards)
    bool right = true;
    for (size_t i = 0; i < numel; ++i) right = right && rank.params[i] == valueAt(i);
    CHECK(right);
  }
  // Together the ranks read every element exactly once.
  std::sort(all.begin(), all.end(),
            [](const Request& a, const Request& b) { return a.offset < b.offset; });
  size_t pos = 0;
  for (const Request& q : all) {
    REQUIRE(q.offset == pos);
    pos += q.size;
  }
  CHECK(pos == numel);
}

TEST_CASE("stage 3: filling the engines raises peak RSS by far less than the full model",
          "[multirank]") {
  // 8M fp32 parameters: 32 MiB for the full model; each rank's engine holds 1/2 of it, its
  // gradients and Adam states before the fill begins.
  const auto ps = model(8, 1000000);
  size_t numel = 0;
  for (const auto& p : ps) numel += p.numel;
  const long fullKb = long(numel * sizeof(float) / 1024);
  const Measured partitioned = fill(ps, false);
  if (partitioned.deltaKb < 0) DS_SKIP("/proc/self/clear_refs cannot reset VmHWM here");
  const Measured control = fill(ps, true);  // the old path: a full vector on each rank
  INFO("full model " << fullKb << " kB; peak RSS rise during the fill: partitioned "
                     << partitioned.deltaKb << " kB (both ranks), full-vector path "
                     << control.deltaKb << " kB");
  CHECK(control.deltaKb >= fullKb);  // the measurement sees a full model when there is one
  // Both ranks together stay below one full model: pieces of kParamSourcePiece elements each.
  CHECK(partitioned.deltaKb < fullKb / 2);
  CHECK(partitioned.ranks[0].params == control.ranks[0].params);
}
