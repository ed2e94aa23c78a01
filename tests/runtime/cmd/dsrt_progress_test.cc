// `dsrt train` draws its progress bar only for a person at a terminal: under a real pty
// (util-linux `script`, in Debian's essential bsdutils) the bar is redrawn in place after every
// step; with stdout a pipe there is no carriage return at all. Both end with the outputs lines.
#include <catch2/catch.hpp>

#include "ds/config.h"
#include "tests/support/spawn_ranks.h"

using Catch::Matchers::Contains;
using ds::test::runCommand;
using ds::test::TempDir;

namespace {

std::string trainCommand(const TempDir& dir) {
  ds::test::writeFile(dir.file("plan.yaml"),
                      "model:\n  gpt: {n_layer: 1, n_head: 2, n_embd: 16, seq_len: 16, "
                      "vocab_size: 64}\ntrain: {steps: 5, log_every: 100}\ndeepspeed:\n"
                      "  train_batch_size: 4\n  train_micro_batch_size_per_gpu: 4\n");
  return "cd " + dir.path() +
         " && env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u MASTER_ADDR -u MASTER_PORT " +
         DS_BINARY_DIR + "/dsrt train plan.yaml";
}

size_t count(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t at = hay.find(needle); at != std::string::npos; at = hay.find(needle, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("dsrt train: a progress bar on a terminal, none into a pipe", "[unit]") {
  TempDir dir;
  std::string out;
  // script -q -e -c CMD /dev/null: CMD on a new pty, its exit status, the pty's output on ours.
  int rc = runCommand("script -qec '" + trainCommand(dir) + "' /dev/null < /dev/null", &out,
                      std::chrono::seconds(120));
  INFO(out);
  REQUIRE(rc == 0);
  CHECK(count(out, "\r[") == 5);  // one redraw per step
  CHECK_THAT(out, Contains("] 5/5 100% | "));
  CHECK_THAT(out, Contains("\x1b[K\r\x1b[Kstep       5/5 | loss"));  // cleared before the line
  CHECK_THAT(out, Contains("summary: none"));
  rc = runCommand(trainCommand(dir) + " | cat", &out, std::chrono::seconds(120));
  INFO(out);
  REQUIRE(rc == 0);
  CHECK(out.find('\r') == std::string::npos);
  CHECK_THAT(out, Contains("\nstep       5/5 | loss"));
  CHECK_THAT(out, Contains("summary: none"));
}
