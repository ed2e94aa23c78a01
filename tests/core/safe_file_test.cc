// safe_file: real planted symlinks, FIFOs, folders and another user's files at the name are
// refused with the path in the message and the link's target untouched; our own leftovers are
// replaced; stale temp files are removed; private folders are checked.
#include "core/safe_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>

#include "core/error.h"
#include "tests/support/skip.h"
#include "tests/support/spawn_ranks.h"

namespace {

using Catch::Contains;
using ds::ExistingFile;

constexpr uid_t kNobody = 65534;

bool exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

void writeAll(int fd, const std::string& text) {
  REQUIRE(::write(fd, text.data(), text.size()) == ssize_t(text.size()));
  ::close(fd);
}

}  // namespace

TEST_CASE("safe_file: a planted symlink is refused in every mode; its target is untouched",
          "[unit]") {
  ds::test::TempDir dir;
  const std::string target = dir.file("victim"), link = dir.file("job.swp");
  ds::test::writeFile(target, "precious\n");
  REQUIRE(::symlink(target.c_str(), link.c_str()) == 0);
  for (ExistingFile mode : {ExistingFile::kRefuse, ExistingFile::kReplace, ExistingFile::kAppend}) {
    CHECK_THROWS_AS(ds::createFile(link, O_WRONLY, 0600, mode, "nvme swap file"), ds::ConfigError);
    CHECK_THROWS_WITH(
        ds::createFile(link, O_WRONLY | O_APPEND, 0600, mode, "nvme swap file"),
        Contains("nvme swap file " + link) && Contains("symbolic link") && Contains(target));
  }
  CHECK_THROWS_WITH(ds::writeFileAtomic(link, "x", 0644, "--save_pid file"),
                    Contains(link) && Contains("symbolic link"));
  CHECK(ds::test::readFile(target) == "precious\n");
  // A dangling link (target not there yet) is refused too, and nothing is created through it.
  const std::string dangling = dir.file("dangling");
  REQUIRE(::symlink(dir.file("made-through").c_str(), dangling.c_str()) == 0);
  CHECK_THROWS_AS(ds::createFile(dangling, O_WRONLY, 0600, ExistingFile::kAppend, "log"),
                  ds::ConfigError);
  CHECK_THROWS_AS(ds::createFile(dangling, O_WRONLY, 0600, ExistingFile::kReplace, "log"),
                  ds::ConfigError);
  CHECK_FALSE(exists(dir.file("made-through")));
}

TEST_CASE("safe_file: a planted temp-name symlink makes writeFileAtomic fail, target untouched",
          "[unit]") {
  ds::test::TempDir dir;
  const std::string target = dir.file("victim"), path = dir.file("summary.json");
  ds::test::writeFile(target, "precious\n");
  REQUIRE(::symlink(target.c_str(), ds::tempNameFor(path).c_str()) == 0);
  CHECK_THROWS_WITH(ds::writeFileAtomic(path, "{}", 0644, "--summary"),
                    Contains(ds::tempNameFor(path)) && Contains("symbolic link"));
  CHECK(ds::test::readFile(target) == "precious\n");
  CHECK_FALSE(exists(path));
}

TEST_CASE("safe_file: a FIFO or folder at the name is refused without blocking", "[unit]") {
  ds::test::TempDir dir;
  const std::string fifo = dir.file("rank0.log"), folder = dir.file("rank1.log");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  REQUIRE(::mkdir(folder.c_str(), 0700) == 0);
  CHECK_THROWS_WITH(ds::createFile(fifo, O_WRONLY | O_APPEND, 0644, ExistingFile::kAppend, "log"),
                    Contains(fifo) && Contains("FIFO"));
  CHECK_THROWS_WITH(ds::createFile(folder, O_WRONLY, 0644, ExistingFile::kReplace, "log"),
                    Contains(folder) && Contains("directory"));
}

TEST_CASE("safe_file: another user's file at the name is refused, and left as it was", "[unit]") {
  if (::geteuid() != 0) DS_SKIP("needs root to make a file owned by another user (nobody)");
  ds::test::TempDir dir;
  const std::string path = dir.file("1234.dsrun");
  ds::test::writeFile(path, "theirs\n");
  REQUIRE(::chown(path.c_str(), kNobody, kNobody) == 0);
  for (ExistingFile mode : {ExistingFile::kRefuse, ExistingFile::kReplace, ExistingFile::kAppend})
    CHECK_THROWS_WITH(ds::createFile(path, O_WRONLY, 0600, mode, "--save_pid file"),
                      Contains(path) && Contains("owned by uid 65534"));
  CHECK_THROWS_WITH(ds::writeFileAtomic(path, "mine\n", 0644, "--save_pid file"),
                    Contains(path) && Contains("owned by uid 65534"));
  CHECK(ds::test::readFile(path) == "theirs\n");
}

TEST_CASE("safe_file: our own leftover is replaced or appended to; kRefuse says it exists",
          "[unit]") {
  ds::test::TempDir dir;
  const std::string path = dir.file("f");
  ds::test::writeFile(path, "old\n");
  writeAll(ds::createFile(path, O_WRONLY | O_APPEND, 0644, ExistingFile::kAppend, "log"), "more\n");
  CHECK(ds::test::readFile(path) == "old\nmore\n");
  writeAll(ds::createFile(path, O_WRONLY, 0600, ExistingFile::kReplace, "swap"), "new\n");
  CHECK(ds::test::readFile(path) == "new\n");
  CHECK_THROWS_WITH(ds::createFile(path, O_WRONLY, 0600, ExistingFile::kRefuse, "hostfile"),
                    Contains(path) && Contains("already exists"));
  ds::writeFileAtomic(path, "atomic\n", 0644, "summary");
  CHECK(ds::test::readFile(path) == "atomic\n");
  CHECK_FALSE(exists(ds::tempNameFor(path)));
  // A second hard link to a file of ours: appending could write into the other name's file.
  REQUIRE(::link(path.c_str(), dir.file("other").c_str()) == 0);
  CHECK_THROWS_WITH(ds::createFile(path, O_WRONLY | O_APPEND, 0644, ExistingFile::kAppend, "log"),
                    Contains("hard links"));
}

TEST_CASE("safe_file: removeStaleTemps removes only <name>.tmp.<digits> files of ours", "[unit]") {
  ds::test::TempDir dir;
  const std::string path = dir.file("optim_rank_00000.json");
  ds::test::writeFile(path + ".tmp.123", "half");
  ds::test::writeFile(path + ".tmp.77", "half");
  ds::test::writeFile(path + ".tmp.x", "keep");
  ds::test::writeFile(dir.file("optim_rank_00001.json.tmp.5"), "another rank's");
  ds::test::writeFile(dir.file("victim"), "precious");
  REQUIRE(::symlink(dir.file("victim").c_str(), (path + ".tmp.9").c_str()) == 0);
  auto removed = ds::removeStaleTemps(path);
  CHECK(removed.size() == 2);
  CHECK_FALSE(exists(path + ".tmp.123"));
  CHECK_FALSE(exists(path + ".tmp.77"));
  CHECK(exists(path + ".tmp.x"));
  CHECK(exists(path + ".tmp.9"));  // not ours to judge: left alone, and the target too
  CHECK(exists(dir.file("optim_rank_00001.json.tmp.5")));
  CHECK(ds::test::readFile(dir.file("victim")) == "precious");
}

TEST_CASE("safe_file: makePrivateDir creates 0700 and refuses links, other modes, owners",
          "[unit]") {
  ds::test::TempDir dir;
  const std::string fresh = dir.file("dsrun-0");
  ds::makePrivateDir(fresh, "temp folder");
  struct stat st;
  REQUIRE(::lstat(fresh.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0700);
  ds::makePrivateDir(fresh, "temp folder");  // again: fine
  REQUIRE(::chmod(fresh.c_str(), 0755) == 0);
  CHECK_THROWS_WITH(ds::makePrivateDir(fresh, "temp folder"), Contains(fresh) && Contains("0755"));
  const std::string link = dir.file("dsrun-1");
  REQUIRE(::symlink(fresh.c_str(), link.c_str()) == 0);
  CHECK_THROWS_WITH(ds::makePrivateDir(link, "temp folder"),
                    Contains(link) && Contains("symbolic link"));
  if (::geteuid() != 0) return;
  const std::string theirs = dir.file("dsrun-2");
  REQUIRE(::mkdir(theirs.c_str(), 0700) == 0);
  REQUIRE(::chown(theirs.c_str(), kNobody, kNobody) == 0);
  CHECK_THROWS_WITH(ds::makePrivateDir(theirs, "temp folder"),
                    Contains(theirs) && Contains("owned by uid 65534"));
}
