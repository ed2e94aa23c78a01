// The shared-memory segment's life and its bad inputs: nothing left in /dev/shm after a normal
// exit or a kill -9 (the next creation removes a dead creator's name), a name that exists and
// belongs to another user, a /dev/shm with no room (a 1 MiB tmpfs in a private mount
// namespace), the off switches, and a group spanning hosts staying on gloo.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "comm/process_group.h"
#include "comm/registry.h"
#include "comm/shm/shm_backend.h"
#include "comm/shm/shm_segment.h"
#include "comm/store/hash_store.h"
#include "comm/store/tcp_store.h"
#include "core/error.h"
#include "tests/comm/conformance_procs.h"
#include "tests/support/skip.h"
#include "tests/support/spawn_ranks.h"

using namespace ds;
using namespace ds::comm;
using namespace ds::test::conformance;
namespace fs = std::filesystem;

namespace {

GroupOptions opts() {
  GroupOptions o;
  o.backend = "gloo";
  o.timeout = std::chrono::seconds(30);
  return o;
}

bool exists(const std::string& name) { return fs::exists(fs::symlink_status("/dev/shm" + name)); }

// Builds a 2-rank gloo group on threads (HashStore); returns each rank's error text ("" = ok)
// and whether rank 0's group is on shm.
std::vector<std::string> twoThreads(bool* onShm = nullptr,
                                    const std::function<void(ProcessGroup&)>& body = {}) {
  auto store = std::make_shared<HashStore>();
  std::vector<std::string> errs(2);
  ds::test::runRanks(2, [&](int r) {
    try {
      auto be = createBackend("gloo", store, r, 2, opts());
      if (r == 0 && onShm) *onShm = isShmBackend(*be);
      ProcessGroup pg(std::move(be));
      if (body) body(pg);
    } catch (const std::exception& e) {
      errs[static_cast<size_t>(r)] = e.what();
    }
  });
  return errs;
}

}  // namespace

TEST_CASE("shm: the segment's name is gone once the group exists, and after exit", "[multirank]") {
  std::string name = shm_impl::peekNextSegmentName();
  bool onShm = false;
  bool seenDuring = true;
  auto errs = twoThreads(&onShm, [&](ProcessGroup& pg) {
    std::vector<float> v(100000, 1.0f);
    pg.allreduce(view(v.data(), v.size()))->wait();
    if (pg.rank() == 0) seenDuring = exists(name);
  });
  CHECK(errs == std::vector<std::string>{"", ""});
  CHECK(onShm);
  CHECK_FALSE(seenDuring);
  CHECK_FALSE(exists(name));
}

TEST_CASE("shm: a segment left by a kill -9 before it was unlinked is removed by the next run",
          "[multiproc]") {
  ds::test::TempDir dir;
  auto res = forkRanks(
      1,
      [&](int) -> std::string {
        auto seg = shm_impl::ShmSegment::create(shm_impl::nextSegmentName(), 1 << 20);
        ds::test::writeFile(dir.file("name"), seg.name());
        ::kill(::getpid(), SIGKILL);  // dies holding the name
        return "not killed";
      },
      std::chrono::seconds(30));
  REQUIRE(res[0].signal == SIGKILL);
  std::string name = ds::test::readFile(dir.file("name"));
  REQUIRE(exists(name));  // the crash left it behind...
  bool onShm = false;
  auto errs = twoThreads(&onShm);  // ...and the next group on this host removes it
  CHECK(errs == std::vector<std::string>{"", ""});
  CHECK(onShm);
  CHECK_FALSE(exists(name));
}

TEST_CASE("shm: a segment name that exists and belongs to another user is a clear error",
          "[multirank]") {
  if (::geteuid() != 0) DS_SKIP("needs root to create a file owned by another uid");
  std::string name = shm_impl::peekNextSegmentName();
  std::string path = "/dev/shm" + name;
  int fd = ::open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY, 0600);
  REQUIRE(fd >= 0);
  ::close(fd);
  REQUIRE(::chown(path.c_str(), 65534, 65534) == 0);
  auto errs = twoThreads();
  CHECK_THAT(errs[0], Catch::Contains(path + " already exists and belongs to uid 65534"));
  CHECK_THAT(errs[0], Catch::Contains("DS_COMM_SHM=0"));
  CHECK_THAT(errs[1], Catch::Contains("group rank 0 could not create the segment"));
  CHECK_THAT(errs[1], Catch::Contains("belongs to uid 65534"));
  struct stat st {};
  CHECK(::stat(path.c_str(), &st) == 0);  // someone else's file: left alone
  CHECK(st.st_uid == 65534u);
  ::unlink(path.c_str());
}

TEST_CASE("shm: /dev/shm without room is a clear error and leaves nothing behind", "[multiproc]") {
  auto res = forkRanks(
      1,
      [&](int) -> std::string {
        if (::unshare(CLONE_NEWNS) != 0) return "skip: unshare(CLONE_NEWNS) not permitted";
        if (::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
            ::mount("tmpfs", "/dev/shm", "tmpfs", 0, "size=1m") != 0) {
          return "skip: cannot mount a small tmpfs on /dev/shm";
        }
        auto errs = twoThreads();  // 2 slots of 1 MiB do not fit in 1 MiB
        std::string out;
        if (errs[0].find("cannot reserve") == std::string::npos ||
            errs[0].find("No space left on device") == std::string::npos ||
            errs[0].find("free space in /dev/shm") == std::string::npos) {
          out += "rank 0: " + errs[0] + "\n";
        }
        if (errs[1].find("could not create the segment") == std::string::npos) {
          out += "rank 1: " + errs[1] + "\n";
        }
        if (!fs::is_empty("/dev/shm")) out += "/dev/shm is not empty afterwards\n";
        return out;
      },
      std::chrono::seconds(60));
  if (res[0].text.rfind("skip: ", 0) == 0) DS_SKIP(res[0].text.substr(6));
  CHECK(res[0].text == "");
  CHECK(res[0].exitCode == 0);
}

TEST_CASE("shm: DS_COMM_SHM=0 and GroupOptions::sharedMemory turn it off", "[multirank]") {
  bool onShm = true;
  ::setenv("DS_COMM_SHM", "0", 1);
  auto errs = twoThreads(&onShm);
  ::unsetenv("DS_COMM_SHM");
  CHECK(errs == std::vector<std::string>{"", ""});
  CHECK_FALSE(onShm);

  auto store = std::make_shared<HashStore>();
  std::vector<int> wrapped(2, -1);
  ds::test::runRanks(2, [&](int r) {
    GroupOptions o = opts();
    o.sharedMemory = false;
    auto be = createBackend("gloo", store, r, 2, o);
    wrapped[static_cast<size_t>(r)] = isShmBackend(*be) ? 1 : 0;
  });
  CHECK(wrapped == std::vector<int>{0, 0});
}

TEST_CASE("shm: ranks the launcher puts on different hosts stay on gloo", "[multiproc]") {
  int port = ds::test::freePort();
  auto res = forkRanks(
      2,
      [&](int r) -> std::string {
        ::setenv("CROSS_RANK", std::to_string(r).c_str(), 1);
        TcpStoreOptions so;
        so.host = "127.0.0.1";
        so.port = port;
        so.isServer = r == 0;
        so.token = "shm-test-token";
        so.timeout = std::chrono::seconds(30);
        auto be = createBackend("gloo", std::make_shared<TcpStore>(so), r, 2, opts());
        if (isShmBackend(*be)) return "put on shm across hosts";
        ProcessGroup pg(std::move(be));
        std::vector<float> v(1000, 1.0f);
        pg.allreduce(view(v.data(), v.size()))->wait();
        return v[999] == 2.0f ? "" : "wrong sum";
      },
      std::chrono::seconds(60));
  CHECK(failures(res) == "");
}

TEST_CASE("shm: ranks that disagree on the slot size fail at once, naming the rank",
          "[multirank]") {
  auto store = std::make_shared<HashStore>();
  std::vector<std::string> errs(2);
  ds::test::runRanks(2, [&](int r) {
    try {
      ShmOptions so;
      so.slotBytes = r == 0 ? 64 << 10 : 128 << 10;  // e.g. DS_COMM_SHM_SLOT_BYTES set on one
      so.timeout = std::chrono::seconds(60);         // a hang would show as a timeout here
      auto be = wrapWithShm(createBackend("gloo", store, r, 2,
                                          [] {
                                            GroupOptions o = opts();
                                            o.sharedMemory = false;
                                            return o;
                                          }()),
                            store, so);
      errs[static_cast<size_t>(r)] = "no error";
    } catch (const std::exception& e) {
      errs[static_cast<size_t>(r)] = e.what();
    }
  });
  CHECK_THAT(errs[1], Catch::Contains("is not this group's segment"));
  CHECK_THAT(errs[0], Catch::Contains("group rank 1 could not open the segment"));
  CHECK_THAT(errs[0], Catch::Contains("rank 0 gives up"));
}
