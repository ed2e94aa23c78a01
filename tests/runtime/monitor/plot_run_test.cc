// scripts/plot_run.py (issue 16 item 6): the loss and lr series it reads back from a csv_monitor
// folder and from a TensorBoard event file, both written by our real monitors, are the values
// written; it draws them into a PNG; bad input exits 2 naming the path. Runs Debian's
// /usr/bin/python3 (python3-matplotlib, scripts/install_deps.sh).
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <filesystem>

#include "runtime/monitor/csv_monitor.h"
#include "runtime/monitor/monitor.h"
#include "runtime/monitor/tensorboard_writer.h"
#include "tests/support/skip.h"
#include "tests/support/spawn_ranks.h"

using namespace ds::runtime;
using Catch::Matchers::Contains;
using ds::test::readFile;
using ds::test::runCommand;
using ds::test::TempDir;

namespace {

std::string plotCommand(const std::string& args) {
  return std::string("/usr/bin/python3 ") + DS_TEST_DATA_DIR + "/../../scripts/plot_run.py " +
         args + " 2>&1";
}

// Three steps of train loss and lr, one eval; what --dump prints for them.
void writeRun(Monitor& m) {
  for (int step = 1; step <= 3; ++step) {
    int64_t samples = step * 16;
    m.write(trainEvents(samples, 4.0 - 0.5 * step, 1e-3 * step, 1.0, 0.25));
  }
  m.write({{"Train/Samples/eval_loss", 2.75, 48}});
  m.flush();
}
constexpr const char* kDump =
    "Train/Samples/eval_loss 48 2.75\n"
    "Train/Samples/lr 16 0.001\nTrain/Samples/lr 32 0.002\nTrain/Samples/lr 48 0.003\n"
    "Train/Samples/train_loss 16 3.5\nTrain/Samples/train_loss 32 3\n"
    "Train/Samples/train_loss 48 2.5\n";

MonitorConfig config(const TempDir& dir, const std::string& job) {
  MonitorConfig c;
  c.enabled = true;
  c.outputPath = dir.path();
  c.jobName = job;
  return c;
}

}  // namespace

TEST_CASE("plot_run.py: reads back what the csv and tensorboard monitors wrote", "[unit]") {
  TempDir dir;
  CsvMonitor csv(config(dir, "csv"));
  writeRun(csv);
  std::string tbPath;
  {
    TensorBoardMonitor tb(config(dir, "tb"));
    writeRun(tb);
    tbPath = tb.path();
  }
  std::string out;
  REQUIRE(runCommand(plotCommand(dir.file("csv") + " --dump"), &out) == 0);
  CHECK(out == kDump);
  // The event file also holds loss_scale and grad_norm; the three tags plotted read back the same.
  REQUIRE(runCommand(plotCommand(tbPath + " --dump"), &out) == 0);
  CHECK_THAT(out, Contains("Train/Samples/grad_norm 48 0.25\n"));
  REQUIRE(runCommand(plotCommand(dir.file("tb") + " --dump | grep -v -e loss_scale -e grad_norm"),
                     &out) == 0);
  CHECK(out == kDump);
}

TEST_CASE("plot_run.py: draws the loss and lr curves into a PNG", "[unit]") {
  std::string probe;
  if (runCommand("/usr/bin/python3 -c 'import matplotlib' 2>&1", &probe) != 0)
    DS_SKIP("python3-matplotlib is not installed (scripts/install_deps.sh): " << probe);
  TempDir dir;
  CsvMonitor csv(config(dir, "csv"));
  writeRun(csv);
  std::string out;
  int rc = runCommand(plotCommand(dir.file("csv") + " -o " + dir.file("run.png")), &out,
                      std::chrono::seconds(120));
  INFO(out);
  REQUIRE(rc == 0);
  CHECK_THAT(out, Contains("wrote " + dir.file("run.png") + " (1 run(s), 3 loss points"));
  std::string png = readFile(dir.file("run.png"));
  REQUIRE(png.size() > 10000);  // two axes with curves, not an empty canvas
  CHECK(png.substr(0, 8) == "\x89PNG\r\n\x1a\n");
  CHECK(png.substr(12, 4) == "IHDR");
  auto be32 = [&](size_t at) {
    return (uint32_t(uint8_t(png[at])) << 24) | (uint32_t(uint8_t(png[at + 1])) << 16) |
           (uint32_t(uint8_t(png[at + 2])) << 8) | uint32_t(uint8_t(png[at + 3]));
  };
  CHECK(be32(16) == 800);  // 8 x 7 inches at 100 dpi
  CHECK(be32(20) == 700);
}

TEST_CASE("plot_run.py: bad input exits 2 naming the path, and writes nothing", "[unit]") {
  TempDir dir;
  std::string out;
  CHECK(runCommand(plotCommand(dir.file("nope") + " -o " + dir.file("x.png")), &out) == 2);
  CHECK_THAT(out, Contains("plot_run: error: " + dir.file("nope") + ": no such file or folder"));
  ::mkdir(dir.file("empty").c_str(), 0700);
  CHECK(runCommand(plotCommand(dir.file("empty") + " -o " + dir.file("x.png")), &out) == 2);
  CHECK_THAT(out, Contains(dir.file("empty") + ": no train loss series"));
  ::mkdir(dir.file("bad").c_str(), 0700);
  ds::test::writeFile(dir.file("bad/Train_Samples_train_loss.csv"), "step,train_loss\n16,x\n");
  CHECK(runCommand(plotCommand(dir.file("bad") + " -o " + dir.file("x.png")), &out) == 2);
  CHECK_THAT(out, Contains(dir.file("bad/Train_Samples_train_loss.csv") +
                           ":2: expected 'step,value', got '16,x'"));
  ds::test::writeFile(dir.file("events.out.tfevents.1.h.1.0"), "short");
  CHECK(runCommand(plotCommand(dir.file("events.out.tfevents.1.h.1.0")), &out) == 2);
  CHECK_THAT(out, Contains("events.out.tfevents.1.h.1.0: truncated record at byte 0"));
  CHECK_FALSE(std::filesystem::exists(dir.file("x.png")));
}
