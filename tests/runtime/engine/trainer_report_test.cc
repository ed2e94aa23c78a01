// What a person watching a run sees (issue 16 item 6): rank 0 alone prints the startup memory
// table, whose figures are the largest over the ranks; step lines carry steps/s and an ETA; with
// a terminal a progress bar is redrawn in place and cleared before every ordinary line; the run
// ends naming where the checkpoints, monitors and summary went.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <mutex>

#include "runtime/engine/run_report.h"
#include "runtime/engine/trainer.h"
#include "tests/runtime/engine/engine_fixtures.h"

using namespace ds;
using namespace ds::runtime;
using Catch::Matchers::Contains;
using ds::test::TempDir;

namespace {

struct Captured {
  std::FILE* f = std::tmpfile();
  ~Captured() { std::fclose(f); }
  std::string text() {
    std::fflush(f);
    std::rewind(f);
    std::string s;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
    return s;
  }
};

size_t count(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t at = hay.find(needle); at != std::string::npos; at = hay.find(needle, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("trainer report: rank 0 alone prints the memory table, the largest over the ranks",
          "[multirank]") {
  const int world = 3;
  Plan p = test::mlpPlan(world, 2, 1, 2);
  p.model.sizes = {16, 49, 16};
  p.deepspeed.trainBatchSize = 15;
  p.deepspeed.microBatchPerGpu = 5;
  std::vector<Captured> outs(world);
  std::vector<zero::MemoryReport> mem(world);
  test::withRanks(world, [&](int rank, comm::ProcessGroup* g) {
    TrainerOptions o;
    o.out = outs[rank].f;
    Trainer t(p, g, o);
    mem[rank] = t.engine().memory();
    t.run();
  });
  zero::MemoryReport maxima;
  size_t largest = 0;
  for (const auto& m : mem) {
    largest = std::max(largest, m.total());
    for (int k = 0; k < 4; ++k)
      for (int place = 0; place < 3; ++place)
        maxima.bytes[k][place] = std::max(maxima.bytes[k][place], m.bytes[k][place]);
  }
  std::string text = outs[0].text();
  INFO(text);
  CHECK_THAT(text, Contains(formatMemoryTable(maxima, largest, world, "cpu") + "\n"));
  CHECK(count(text, "memory per rank at start") == 1);
  CHECK_THAT(text, Contains("largest over 3 ranks"));
  for (int r = 1; r < world; ++r) CHECK(outs[r].text().empty());
}

TEST_CASE("trainer report: the memory table takes each cell's largest value over the ranks",
          "[multirank]") {
  // Ranks of this engine hold the same bytes (partitions are padded equal), so the reduction is
  // checked on reports that differ by rank: rank r holds r+1 MiB of grads on the host, and
  // rank 1 alone 3 GiB + 1 byte of nvme (beyond float's 2^24 exact integers: rounded, not lost).
  const int world = 3;
  std::vector<zero::MemoryReport> got(world);
  std::vector<size_t> totals(world);
  test::withRanks(world, [&](int rank, comm::ProcessGroup* g) {
    zero::MemoryReport mine;
    mine.bytes[1][1] = size_t(rank + 1) << 20;
    mine.bytes[0][0] = 1000;
    if (rank == 1) mine.bytes[2][2] = (size_t(3) << 30) + 1;
    got[rank] = largestOverRanks(g, mine, &totals[rank]);
  });
  for (int r = 0; r < world; ++r) {
    CHECK(got[r].bytes[1][1] == size_t(3) << 20);
    CHECK(got[r].bytes[0][0] == 1000);
    CHECK(got[r].bytes[2][2] == size_t(3) << 30);
    // rank 1's total, rounded to float as every cell is (24 bits: 256-byte steps at 3 GiB)
    const size_t rank1Total = (size_t(3) << 30) + (size_t(2) << 20) + 1000 + 1;
    CHECK(totals[r] == size_t(double(float(rank1Total))));
  }
  zero::MemoryReport one;
  one.bytes[3][0] = 7;
  size_t total = 0;
  CHECK(largestOverRanks(nullptr, one, &total).bytes[3][0] == 7);
  CHECK(total == 7);
}

TEST_CASE("trainer report: steps/s, ETA, a progress bar, and where everything went", "[unit]") {
  TempDir dir;
  Plan p = test::mlpPlan(1, 0, 1, 6);
  p.train.logEvery = 2;
  p.train.checkpointDir = dir.file("ckpt");
  p.deepspeed.csvMonitor.enabled = true;
  p.deepspeed.csvMonitor.outputPath = dir.file("runs");
  p.deepspeed.csvMonitor.jobName = "job";
  Captured out;
  TrainerOptions o;
  o.out = out.f;
  o.progressBar = true;
  o.summaryPath = dir.file("summary.json");
  Trainer(p, nullptr, o).run();
  std::string text = out.text();
  INFO(text);
  CHECK(count(text, "memory per rank at start, MiB (1 rank;") == 1);
  CHECK_THAT(text, Contains(" 2/6 | loss"));
  CHECK_THAT(text, Contains(" steps/s | ETA "));
  // One bar per step, each redrawn from column 0 and erasing the rest of the line.
  CHECK(count(text, "\r[") == 6);
  CHECK_THAT(text, Contains("] 6/6 100%"));
  // An ordinary line after a bar first clears it: no step line starts mid-bar.
  CHECK(count(text, "\x1b[K\r\x1b[Kstep ") == 3);  // steps 2, 4, 6 (step 1 comes before any bar)
  CHECK_THAT(text, Contains("checkpoints: " + dir.file("ckpt") + " (latest: global_step6)\n"));
  CHECK_THAT(text, Contains("monitors: csv_monitor " + dir.file("runs/job") +
                            " (plot: scripts/plot_run.py)\n"));
  CHECK_THAT(text, Contains("summary: " + dir.file("summary.json") + "\n"));
  CHECK(std::filesystem::exists(dir.file("summary.json")));
  CHECK(text.substr(text.size() - 1) == "\n");  // the bar does not outlive the run
}

TEST_CASE("trainer report: without a terminal no bar, and nothing written is said as such",
          "[unit]") {
  Plan p = test::mlpPlan(1, 0, 1, 2);
  Captured out;
  TrainerOptions o;
  o.out = out.f;
  Trainer(p, nullptr, o).run();
  std::string text = out.text();
  INFO(text);
  CHECK(text.find('\r') == std::string::npos);
  CHECK_THAT(text, Contains("checkpoints: none (set train.checkpoint.dir to save them)\n"));
  CHECK_THAT(text, Contains("monitors: none (enable csv_monitor or tensorboard"));
  CHECK_THAT(text, Contains("summary: none (pass --summary FILE or set train.checkpoint.dir)\n"));
}
