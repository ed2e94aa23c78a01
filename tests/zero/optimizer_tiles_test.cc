// The in-memory optimizer's sub-group tiles (OptimizerPartition::setUpdateTile) and the engine's
// parameters-ready announcements built on them (ZeroEngine::setParamsReady, what the device
// mirror's optimizer overlap listens to): any tile size gives bitwise the one-pass result (tiles
// that do not divide the partition, that split decay runs, of 1 element), the listener sees every
// tile exactly once, in order, and a region's host parameters are final when it is announced; on
// 1 and 2 ranks, at every stage, fp32 and bf16, with and without offload_optimizer cpu.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "tests/zero/zero_ranks.h"
#include "zero/optimizer_partition.h"

using namespace ds;
using namespace ds::zero;

namespace {

std::vector<float> pattern(size_t n, float scale, unsigned salt) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = scale * float(int(((i + salt) * 2654435761u) % 2001) - 1000) / 1000.f;
  return v;
}

struct Result {
  std::vector<std::vector<float>> states;
  std::vector<uint16_t> half;
  std::vector<std::pair<size_t, size_t>> tiles;  // afterTile's (offset, count), every step
};

// Three steps over a partition of n (updating the first `count`), with decay runs that tiles
// split, a bf16 copy, and the master owned or aliased; tile 0 = one pass (sub_group_size).
Result run(const OptimizerOptions& oo, size_t n, size_t count, size_t tile, bool alias) {
  std::vector<float> model = pattern(n, 0.5f, 7);
  OptimizerPartition part(n, oo, OffloadOptions{}, tile ? tile : n, alias ? model.data() : nullptr,
                          0);
  if (!alias) part.write(0, 0, n, model.data());
  part.setDecayRuns({{3, 40}, {41, 42}, {100, n / 2}, {n / 2 + 5, n}});
  Result r;
  r.half.assign(n, 0);
  for (int step = 1; step <= 3; ++step) {
    const auto g = pattern(n, float(step), unsigned(step));
    part.update(g.data(), count, 0.75f, 1e-2f, step, {DType::kBF16, r.half.data()},
                [&](size_t off, size_t cnt, const float* master) {
                  // master points at the tile's fp32 values, already updated
                  float first = 0;
                  part.read(0, off, 1, &first);
                  CHECK(std::memcmp(&first, master, sizeof(float)) == 0);
                  r.tiles.emplace_back(off, cnt);
                });
  }
  for (size_t s = 0; s < part.stateNames().size(); ++s) {
    r.states.emplace_back(n);
    part.read(s, 0, n, r.states.back().data());
  }
  return r;
}

void checkTiles(const std::vector<std::pair<size_t, size_t>>& tiles, size_t count, size_t tile,
                int steps) {
  size_t k = 0;
  for (int step = 0; step < steps; ++step)
    for (size_t off = 0; off < count; off += tile, ++k) {
      REQUIRE(k < tiles.size());
      CHECK(tiles[k].first == off);
      CHECK(tiles[k].second == std::min(tile, count - off));
    }
  CHECK(k == tiles.size());
}

}  // namespace

TEST_CASE("optimizer tiles: any update tile is bitwise the one-pass update, tiles in order",
          "[unit]") {
  const size_t n = 5000;
  for (const char* type : {"AdamW", "Adam", "SGD"}) {
    OptimizerOptions oo;
    oo.type = type;
    oo.weightDecay = 0.05f;
    oo.momentum = std::string(type) == "SGD" ? 0.9f : 0.f;
    for (bool alias : {false, true}) {
      for (size_t count : {n, n - 333}) {
        const Result whole = run(oo, n, count, 0, alias);
        checkTiles(whole.tiles, count, count, 3);
        for (size_t tile :
             {size_t(1), size_t(7), size_t(64), size_t(1000), size_t(1024), size_t(4999), n + 3}) {
          INFO(type << " alias " << alias << " count " << count << " tile " << tile);
          const Result tiled = run(oo, n, count, tile, alias);
          CHECK(tiled.states == whole.states);
          CHECK(tiled.half == whole.half);
          checkTiles(tiled.tiles, count, std::min(tile, n), 3);
        }
      }
    }
  }
}

TEST_CASE("optimizer tiles: setUpdateTile shrinks the tile below sub_group_size, never above",
          "[unit]") {
  OptimizerOptions oo;
  OptimizerPartition part(100, oo, OffloadOptions{}, 30, nullptr, 0);
  CHECK(part.updateTile() == 30);
  part.setUpdateTile(7);
  CHECK(part.updateTile() == 7);
  part.setUpdateTile(1000);
  CHECK(part.updateTile() == 30);
}

namespace {

// One rank's announcements, in order, with the host parameter bytes each region held when it was
// announced (compared with the values after the last step).
struct Heard {
  std::vector<std::pair<size_t, size_t>> regions;
  std::vector<std::vector<char>> bytes;
  bool changedAfter = false;  // a region of the last step changed after it was announced
};

// The host model parameters of flat [offset, offset + size) as the table holds them (fp32 or
// bf16 bytes); stages 0-2 keep them all, outside the hooks too.
std::vector<char> hostBytes(ZeroEngine& eng, const std::vector<ParamInfo>& params, bool half,
                            size_t offset, size_t size) {
  std::vector<char> out;
  const size_t es = half ? 2 : 4, end = offset + size;
  for (size_t i = 0, flat = 0; i < params.size(); flat += params[i].numel, ++i) {
    const size_t begin = std::max(offset, flat), stop = std::min(end, flat + params[i].numel);
    if (begin >= stop) continue;
    const char* src = half ? reinterpret_cast<const char*>(eng.table().value16[i])
                           : reinterpret_cast<const char*>(eng.table().value[i]);
    REQUIRE(src != nullptr);
    out.insert(out.end(), src + (begin - flat) * es, src + (stop - flat) * es);
  }
  return out;
}

}  // namespace

TEST_CASE("optimizer tiles: the engine announces final parameter regions, same bits, 1-2 ranks",
          "[unit][multirank]") {
  const int steps = 3;
  for (bool bf16 : {false, true}) {
    const test::ToyModel m(3, 6, bf16);
    const size_t numel = [&] {
      size_t total = 0;
      for (const auto& p : m.params) total += p.numel;
      return total;
    }();
    for (int world : {1, 2}) {
      // One job per configuration without a listener, then the same with each tile size.
      struct Config {
        int stage;
        const char* offload;
        size_t tile, subGroup;
      };
      std::vector<Config> configs;
      for (int stage : {0, 1, 2, 3})
        for (const char* offload : {"none", "cpu"}) {
          if (stage == 0 && std::string(offload) == "cpu") continue;
          configs.push_back({stage, offload, 0, 1000000000});      // reference: no listener
          configs.push_back({stage, offload, 7, 1000000000});      // tiles not dividing numel
          configs.push_back({stage, offload, 1, 1000000000});      // one element per tile
          configs.push_back({stage, offload, 100000, 25});         // sub_group_size caps the tile
          configs.push_back({stage, offload, numel, 1000000000});  // one tile
        }
      std::vector<std::vector<Heard>> heard(configs.size(), std::vector<Heard>(size_t(world)));
      std::vector<test::ZeroJob> jobs;
      for (size_t c = 0; c < configs.size(); ++c) {
        test::ZeroJob job;
        job.z.stage = configs[c].stage;
        job.z.offloadOptimizer.device = configs[c].offload;
        job.z.subGroupSize = configs[c].subGroup;
        job.z.compute = bf16 ? DType::kBF16 : DType::kF32;
        job.z.reduceBucketSize = 40;
        job.steps = steps;
        if (configs[c].tile != 0) {
          job.setup = [&, c](ZeroEngine& eng, int rank) {
            Heard& h = heard[c][size_t(rank)];
            eng.setParamsReady(
                [&h, &eng, &m, bf16](size_t offset, size_t size) {
                  h.regions.emplace_back(offset, size);
                  h.bytes.push_back(hostBytes(eng, m.params, bf16, offset, size));
                },
                configs[c].tile);
          };
          job.finish = [&, c](ZeroEngine& eng, int rank) {
            Heard& h = heard[c][size_t(rank)];
            // The last step's regions: their bytes then are the bytes now (final on announce).
            size_t covered = 0;
            for (size_t k = h.regions.size(); k-- > 0 && covered < numel;) {
              covered += h.regions[k].second;
              if (hostBytes(eng, m.params, bf16, h.regions[k].first, h.regions[k].second) !=
                  h.bytes[k])
                h.changedAfter = true;  // checked on the main thread
            }
          };
        }
        jobs.push_back(job);
      }
      const auto runs = test::runZeroJobs(m, world, jobs);
      for (size_t c = 0; c < configs.size(); ++c) {
        const Config& cf = configs[c];
        INFO("bf16 " << bf16 << " world " << world << " stage " << cf.stage << " offload "
                     << cf.offload << " tile " << cf.tile << " sub_group_size " << cf.subGroup);
        const size_t ref = c - c % 5;  // the job without a listener
        CHECK(runs[c].losses == runs[ref].losses);
        CHECK(runs[c].params == runs[ref].params);
        CHECK(runs[c].ranksAgree);
        if (cf.tile == 0) continue;
        for (int rank = 0; rank < world; ++rank) {
          const auto& regions = heard[c][size_t(rank)].regions;
          // Expected: stage 3 nothing; one rank (and stage 0) each tile in order; several ranks
          // at stages 1-2 the whole space once the allgather is done.
          std::vector<std::pair<size_t, size_t>> want;
          const size_t tile = std::min(cf.tile, cf.subGroup);
          for (int step = 0; step < steps && cf.stage != 3; ++step) {
            if (world > 1 && cf.stage != 0) {
              want.emplace_back(0, numel);
              continue;
            }
            for (size_t off = 0; off < numel; off += tile)
              want.emplace_back(off, std::min(tile, numel - off));
          }
          CHECK(regions == want);
          CHECK_FALSE(heard[c][size_t(rank)].changedAfter);
        }
      }
    }
  }
}
