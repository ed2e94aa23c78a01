// The mpirun hostfile's private folder: created 0700, refused when it is a symlink, another
// user's or open to others; the file itself refuses a planted name; a SIGKILLed dsrun's hostfile
// (a real kill of a process holding one) is removed by the next one, a live one's is kept.
#include "launcher/temp_hostfile.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <string>

#include "core/error.h"
#include "tests/support/skip.h"
#include "tests/support/spawn_ranks.h"

using namespace ds::launcher;
using Catch::Contains;

namespace {

bool exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

mode_t modeOf(const std::string& path) {
  struct stat st;
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

}  // namespace

TEST_CASE("temp hostfile: $TMPDIR/dsrun-<uid>/<pid>-<job>.hostfile, 0700 folder, 0600 file",
          "[unit]") {
  ds::test::TempDir tmp;
  const ds::EnvMap env = {{"TMPDIR", tmp.path() + "/"}};
  const std::string dir = fmt::format("{}/dsrun-{}", tmp.path(), ::geteuid());
  CHECK(privateTempDir(env) == dir);
  CHECK(privateTempDir({}) == fmt::format("/tmp/dsrun-{}", ::geteuid()));
  const std::string path = tempHostfilePath(env, "dsrun-abc");
  CHECK(path == fmt::format("{}/{}-dsrun-abc.hostfile", dir, ::getpid()));
  {
    TempHostfile file(path, "127.0.0.2 slots=2\n");
    CHECK(modeOf(dir) == 0700);
    CHECK(modeOf(path) == 0600);
    CHECK(ds::test::readFile(path) == "127.0.0.2 slots=2\n");
  }
  CHECK_FALSE(exists(path));
  CHECK(exists(dir));
}

TEST_CASE("temp hostfile: a planted folder or file name is refused, the target untouched",
          "[unit]") {
  ds::test::TempDir tmp, elsewhere;
  const ds::EnvMap env = {{"TMPDIR", tmp.path()}};
  const std::string dir = privateTempDir(env), path = tempHostfilePath(env, "dsrun-j");
  REQUIRE(::symlink(elsewhere.path().c_str(), dir.c_str()) == 0);
  CHECK_THROWS_WITH(TempHostfile(path, "h\n"), Contains(dir) && Contains("symbolic link"));
  CHECK_FALSE(exists(elsewhere.file(fmt::format("{}-dsrun-j.hostfile", ::getpid()))));
  REQUIRE(::unlink(dir.c_str()) == 0);
  REQUIRE(::mkdir(dir.c_str(), 0755) == 0);
  CHECK_THROWS_WITH(TempHostfile(path, "h\n"), Contains(dir) && Contains("0755"));
  REQUIRE(::chmod(dir.c_str(), 0700) == 0);
  ds::test::writeFile(elsewhere.file("victim"), "precious\n");
  REQUIRE(::symlink(elsewhere.file("victim").c_str(), path.c_str()) == 0);
  CHECK_THROWS_WITH(TempHostfile(path, "h\n"),
                    Contains("mpirun hostfile " + path) && Contains("symbolic link"));
  CHECK(ds::test::readFile(elsewhere.file("victim")) == "precious\n");
  if (::geteuid() != 0) return;
  REQUIRE(::unlink(path.c_str()) == 0);
  REQUIRE(::chown(dir.c_str(), 65534, 65534) == 0);
  CHECK_THROWS_WITH(TempHostfile(path, "h\n"), Contains(dir) && Contains("owned by uid 65534"));
}

TEST_CASE("temp hostfile: a SIGKILLed holder's hostfile is removed by the next, a live one kept",
          "[multiproc]") {
  ds::test::TempDir tmp;
  const ds::EnvMap env = {{"TMPDIR", tmp.path()}};
  const std::string dir = privateTempDir(env);
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  const pid_t child = ::fork();
  if (child == 0) {  // a dsrun holding its hostfile, killed before it can remove it
    TempHostfile file(tempHostfilePath(env, "dsrun-killed"), "h\n");
    (void)!::write(ready[1], "x", 1);
    ::pause();
    ::_exit(0);
  }
  ::close(ready[1]);
  char byte = 0;
  REQUIRE(::read(ready[0], &byte, 1) == 1);
  ::close(ready[0]);
  REQUIRE(::kill(child, SIGKILL) == 0);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  const std::string stale = fmt::format("{}/{}-dsrun-killed.hostfile", dir, child);
  REQUIRE(exists(stale));
  // A live dsrun's (pid 1 is always running) and names not of the form are kept.
  const std::string live = dir + "/1-dsrun-live.hostfile", other = dir + "/notes.hostfile";
  ds::test::writeFile(live, "h\n");
  ds::test::writeFile(other, "h\n");
  {
    TempHostfile next(tempHostfilePath(env, "dsrun-next"), "h\n");
    CHECK_FALSE(exists(stale));
    CHECK(exists(live));
    CHECK(exists(other));
  }
}
