// Runs that must not end with exit 0 (issue 14 item 4), each made for real with the dsrt binary:
// a learning rate that makes the loss NaN in fp32 and bf16, an fp16 run whose dynamic scaler
// reaches its minimum, a checkpoint folder and a --summary folder on a real read-only mount (a
// private mount namespace: we run as root, which ignores permission bits) or not writable by a
// real unprivileged user, a CSV monitor folder on a read-only mount, a --summary whose folder is
// missing. Each asserts the message, the exit status, that no step ran where the check belongs
// before the first step, and that nothing was written.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "ds/config.h"
#include "tests/support/skip.h"
#include "tests/support/spawn_ranks.h"

using ds::test::runCommand;
using ds::test::TempDir;
using ds::test::writeFile;
namespace fs = std::filesystem;

namespace {

std::string dsrt() { return std::string(DS_BINARY_DIR) + "/dsrt"; }

std::string single(const std::string& args) {
  return "env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u MASTER_ADDR -u MASTER_PORT " + dsrt() + " " +
         args;
}

// A tiny plan: one block, 16 wide, 8 tokens, batch 4 on the synthetic corpus.
std::string tinyPlan(const TempDir& dir, const std::string& extra = "") {
  const std::string path = dir.file("plan.yaml");
  writeFile(path,
            "model:\n  gpt: {n_layer: 1, n_head: 2, n_embd: 16, seq_len: 8, vocab_size: 64}\n"
            "data:\n  synthetic: {seed: 1, tokens: 65536, val_tokens: 4096, branching: 4}\n"
            "train: {steps: 12, eval_every: 0, eval_steps: 1, log_every: 1}\n"
            "deepspeed:\n  train_batch_size: 4\n"
            "  optimizer: {type: AdamW, params: {lr: 0.01}}\n" +
                extra);
  return path;
}

size_t entries(const std::string& dir) {
  std::error_code ec;
  size_t n = 0;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); ++it) ++n;
  return n;
}

// `cmd` run with `dir` bind-mounted read-only over itself in a private mount namespace, so the
// folder is really read-only for this command only (EROFS, which root cannot bypass). Returns
// false when this machine does not allow it (no CAP_SYS_ADMIN, no unshare).
bool readOnlyMountWorks(const std::string& dir) {
  std::string out;
  return runCommand("unshare -m sh -c 'mount --bind " + dir + " " + dir +
                        " && mount -o remount,bind,ro " + dir + " " + dir + " && ! touch " + dir +
                        "/probe' 2>&1",
                    &out) == 0 &&
         !fs::exists(dir + "/probe");
}

int runReadOnly(const std::string& dir, const std::string& cmd, std::string* out) {
  return runCommand("unshare -m sh -c 'mount --bind " + dir + " " + dir +
                        " && mount -o remount,bind,ro " + dir + " " + dir + " && exec " + cmd +
                        "' 2>&1",
                    out);
}

}  // namespace

TEST_CASE("bad run: a loss that becomes NaN stops fp32 and bf16 runs with exit 1", "[unit]") {
  for (const char* dtype : {"fp32", "bf16"}) {
    DYNAMIC_SECTION(dtype) {
      TempDir dir;
      const std::string bf16 = std::string(dtype) == "bf16" ? "  bf16: {enabled: true}\n" : "";
      const std::string plan = tinyPlan(dir, bf16);
      std::string out;
      // lr 1e30 without clipping: the first update sends the weights to inf, the next loss is NaN.
      const int rc = runCommand(
          single("train " + plan + " --set train.checkpoint.dir=" + dir.file("ck") +
                 " --set train.checkpoint.every=1 --set deepspeed.gradient_clipping=0"
                 " --set deepspeed.optimizer.params.lr=1e30 --set deepspeed.scheduler=null"
                 " --summary " +
                 dir.file("s.json")) +
              " 2>&1",
          &out);
      INFO(out);
      CHECK(rc == 1);
      const auto at = out.find(": loss is NaN (" + std::string(dtype) +
                               ", lr 1e+30): training "
                               "diverged; stopped without saving a checkpoint or run summary");
      REQUIRE(at != std::string::npos);
      const auto stepAt = out.rfind("step ", at);
      const int bad = std::stoi(out.substr(stepAt + 5));
      CHECK(bad >= 2);
      CHECK(bad < 12);
      CHECK(out.find("done:") == std::string::npos);
      // Nothing of the diverged step was saved: latest names the step before it, no summary.
      CHECK(ds::test::readFile(dir.file("ck/latest")) ==
            "global_step" + std::to_string(bad - 1) + "\n");
      CHECK_FALSE(fs::exists(dir.file("ck/global_step" + std::to_string(bad))));
      CHECK_FALSE(fs::exists(dir.file("s.json")));
    }
  }
}

TEST_CASE("bad run: fp16 whose dynamic loss scale reaches its minimum exits 1", "[unit]") {
  TempDir dir;
  const std::string plan = dir.file("plan.yaml");
  std::string out;
  writeFile(plan,
            "model:\n  gpt: {n_layer: 1, n_head: 2, n_embd: 16, seq_len: 8, vocab_size: 64}\n"
            "data:\n  synthetic: {seed: 1, tokens: 65536, val_tokens: 4096, branching: 4}\n"
            "train: {steps: 40, eval_every: 0, eval_steps: 1, log_every: 1}\n"
            "deepspeed:\n  train_batch_size: 4\n  gradient_clipping: 0\n"
            "  fp16: {enabled: true, initial_scale_power: 3, min_loss_scale: 1}\n"
            "  optimizer: {type: AdamW, params: {lr: 1.0e+30}}\n");
  const int rc =
      runCommand(single("train " + plan + " --summary " + dir.file("s.json")) + " 2>&1", &out);
  INFO(out);
  CHECK(rc == 1);
  // Overflow on every step: hysteresis 2 first, then scale 8 -> 4 -> 2 -> 1; the next stops it.
  CHECK(out.find("reducing to 1\n") != std::string::npos);
  CHECK(out.find(": Current loss scale already at minimum - cannot decrease scale anymore. "
                 "Exiting run.") != std::string::npos);
  CHECK(out.find("Error: step ") != std::string::npos);
  CHECK_FALSE(fs::exists(dir.file("s.json")));
}

TEST_CASE("bad run: a read-only checkpoint folder is refused before the first step", "[unit]") {
  TempDir dir;
  const std::string ro = dir.file("ro");
  fs::create_directory(ro);
  if (!readOnlyMountWorks(ro)) DS_SKIP("cannot make a read-only bind mount here (unshare -m)");
  const std::string plan = tinyPlan(dir);
  for (const std::string& ck : {ro, ro + "/ck/sub"}) {  // the folder itself, or one to be created
    std::string out;
    const int rc = runReadOnly(ro,
                               single("train " + plan + " --set train.checkpoint.dir=" + ck +
                                      " --summary " + dir.file("s.json")),
                               &out);
    INFO(out);
    CHECK(rc == 2);
    CHECK(out.find("ConfigError: train.checkpoint.dir '" + ck + "': cannot create files in '" + ro +
                   "': Read-only file system") != std::string::npos);
    CHECK(out.find("step ") == std::string::npos);  // no step ran
    CHECK(entries(ro) == 0);
    CHECK_FALSE(fs::exists(dir.file("s.json")));
  }
}

TEST_CASE("bad run: an unwritable --summary folder is refused before the first step", "[unit]") {
  TempDir dir;
  const std::string ro = dir.file("ro");
  fs::create_directory(ro);
  const std::string plan = tinyPlan(dir);
  std::string out;
  // A missing folder (writeSummary does not create it), and a folder where a file was named.
  CHECK(runCommand(single("train " + plan + " --summary " + dir.file("none/s.json")) + " 2>&1",
                   &out) == 2);
  CHECK(out.find("ConfigError: --summary '" + dir.file("none/s.json") + "': folder '" +
                 dir.file("none") + "' does not exist") != std::string::npos);
  CHECK(out.find("step ") == std::string::npos);
  CHECK(runCommand(single("train " + plan + " --summary " + ro) + " 2>&1", &out) == 2);
  CHECK(out.find("ConfigError: --summary '" + ro + "': is a folder, expected a file") !=
        std::string::npos);
  if (!readOnlyMountWorks(ro)) DS_SKIP("cannot make a read-only bind mount here (unshare -m)");
  const int rc = runReadOnly(ro, single("train " + plan + " --summary " + ro + "/s.json"), &out);
  INFO(out);
  CHECK(rc == 2);
  CHECK(out.find("ConfigError: --summary '" + ro + "/s.json': cannot create files in '" + ro +
                 "': Read-only file system") != std::string::npos);
  CHECK(out.find("step ") == std::string::npos);
  CHECK(entries(ro) == 0);
}

TEST_CASE("bad run: a CSV monitor folder on a read-only mount is refused before step 1", "[unit]") {
  TempDir dir;
  const std::string ro = dir.file("ro");
  fs::create_directory(ro);
  if (!readOnlyMountWorks(ro)) DS_SKIP("cannot make a read-only bind mount here (unshare -m)");
  const std::string plan =
      tinyPlan(dir, "  csv_monitor: {enabled: true, output_path: " + ro + ", job_name: j}\n");
  std::string out;
  const int rc = runReadOnly(ro, single("train " + plan), &out);
  INFO(out);
  CHECK(rc == 2);
  CHECK(out.find("ConfigError: deepspeed.csv_monitor.output_path '" + ro +
                 "/j': cannot create files in '" + ro + "': Read-only file system") !=
        std::string::npos);
  CHECK(out.find("step ") == std::string::npos);
  CHECK(entries(ro) == 0);
}

TEST_CASE("bad run: a checkpoint folder another user cannot write is refused (EACCES)", "[unit]") {
  // As root, permission bits do not apply: run dsrt as the unprivileged user nobody instead.
  TempDir dir;
  const std::string ck = dir.file("ck");
  fs::create_directory(ck);
  ::chmod(dir.path().c_str(), 0755);
  ::chmod(ck.c_str(), 0555);
  const std::string plan = tinyPlan(dir);
  ::chmod(plan.c_str(), 0644);
  std::string prefix;
  if (::geteuid() == 0) {
    std::string probe;
    if (runCommand("setpriv --reuid=65534 --regid=65534 --clear-groups test -r " + plan, &probe) !=
        0)
      DS_SKIP("cannot run as user nobody here (setpriv): " << probe);
    prefix = "setpriv --reuid=65534 --regid=65534 --clear-groups ";
  }
  std::string out;
  const int rc = runCommand(
      prefix + single("train " + plan + " --set train.checkpoint.dir=" + ck) + " 2>&1", &out);
  INFO(out);
  CHECK(rc == 2);
  CHECK(out.find("ConfigError: train.checkpoint.dir '" + ck + "': cannot create files in '" + ck +
                 "': Permission denied") != std::string::npos);
  CHECK(out.find("step ") == std::string::npos);
  CHECK(entries(ck) == 0);
}
