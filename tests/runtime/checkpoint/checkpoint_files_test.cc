// Checkpoint temp files: a symlink planted at a temp name makes the save fail naming it (target
// untouched, `latest` not moved); the half-written temp files of a really SIGKILLed save are
// removed by the next save into the same folder, which works, both for a new tag and for a tag
// re-saved beside itself (<tag>.saving).
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/safe_file.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/durable_file.h"
#include "runtime/checkpoint/layout.h"
#include "tests/support/spawn_ranks.h"

using Catch::Matchers::Contains;
using ds::runtime::CheckpointReader;
using ds::runtime::SaveRequest;
namespace fs = std::filesystem;

namespace {

const std::vector<ds::zero::ParamInfo> kParams = {{"w", {4, 4}, 16, {0}, true},
                                                  {"b", {4}, 4, {0}, false}};

void save(const std::string& dir, const std::string& tag, int64_t step) {
  static std::vector<float> full(20, 0.25f), state(20, 0.5f);
  SaveRequest q;
  q.dir = dir;
  q.tag = tag;
  q.step = step;
  q.params = &kParams;
  q.fullParams = full.data();
  q.optimizer = {{"fp32", 0, 20, state.data()}, {"exp_avg", 0, 20, state.data()}};
  ds::runtime::saveCheckpoint(q);
}

// Names under dir (recursively) containing ".tmp.".
std::vector<std::string> tempFiles(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().filename().string().find(".tmp.") != std::string::npos)
      out.push_back(e.path().string());
  return out;
}

// A save in a child process, really SIGKILLed while its temp files of `paths` are half written.
pid_t killMidSave(const std::vector<std::string>& paths) {
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(ready[0]);
    std::vector<std::unique_ptr<ds::runtime::ckpt::DurableWriter>> writers;
    std::vector<char> half(1 << 16, 'x');
    for (const auto& p : paths) {
      fs::create_directories(fs::path(p).parent_path());
      writers.push_back(std::make_unique<ds::runtime::ckpt::DurableWriter>(p));
      writers.back()->write(half.data(), half.size());
    }
    (void)!::write(ready[1], "x", 1);
    ::pause();
    ::_exit(0);
  }
  ::close(ready[1]);
  char byte = 0;
  CHECK(::read(ready[0], &byte, 1) == 1);
  ::close(ready[0]);
  REQUIRE(::kill(child, SIGKILL) == 0);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFSIGNALED(status));
  return child;
}

}  // namespace

TEST_CASE("checkpoint files: a symlink planted at a temp name fails the save, target untouched",
          "[unit]") {
  ds::test::TempDir dir, elsewhere;
  save(dir.path(), "step1", 1);
  const std::string victim = elsewhere.file("victim");
  ds::test::writeFile(victim, "precious\n");
  fs::create_directories(dir.file("step2"));
  const std::string planted =
      ds::tempNameFor(dir.file("step2/" + ds::runtime::ckpt::optimFileName(0)));
  REQUIRE(::symlink(victim.c_str(), planted.c_str()) == 0);
  CHECK_THROWS_AS(save(dir.path(), "step2", 2), ds::ConfigError);
  CHECK_THROWS_WITH(save(dir.path(), "step2", 2),
                    Contains(planted) && Contains("symbolic link") && Contains(victim));
  CHECK(ds::test::readFile(victim) == "precious\n");
  CHECK(ds::runtime::readLatestTag(dir.path()) == "step1");
}

TEST_CASE("checkpoint files: a SIGKILLed save's temp files are removed; the next save works",
          "[multiproc]") {
  using ds::runtime::ckpt::kManifest;
  using ds::runtime::ckpt::optimFileName;
  ds::test::TempDir dir;
  // A new tag, killed before anything was committed.
  killMidSave({dir.file("step1/" + optimFileName(0)), dir.file("step1/" + std::string(kManifest)),
               dir.file("latest")});
  REQUIRE(tempFiles(dir.path()).size() == 3);
  save(dir.path(), "step1", 1);
  CHECK(tempFiles(dir.path()).empty());
  CHECK(CheckpointReader::open(dir.path())->info().step == 1);
  // The same tag re-saved beside itself (<tag>.saving), killed mid-way, then saved again.
  killMidSave({dir.file("step1.saving/" + optimFileName(0)), dir.file("latest")});
  REQUIRE(tempFiles(dir.path()).size() == 2);
  CHECK(CheckpointReader::open(dir.path())->info().step == 1);  // the old copy still loads
  save(dir.path(), "step1", 5);
  CHECK(tempFiles(dir.path()).empty());
  CHECK_FALSE(fs::exists(dir.file("step1.saving")));
  CHECK(CheckpointReader::open(dir.path())->info().step == 5);
}
