// AsyncFile, the NVMe swap file layer, on real files: io_uring is used and O_DIRECT is on where
// the kernel and the filesystem allow them (a non-tmpfs directory is picked with statfs; the
// case is skipped, DS_SKIP, when none is found); I/Os larger than the request limit are
// cut into bounded requests (the limit is lowered so small files take the split path, also past
// the ring depth); a short completion is resubmitted for the rest; end of file and a failing
// request surface as SystemError naming the file; the pread/pwrite thread (forced by option and
// by DS_ZERO_NO_URING=1) behaves the same.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <linux/io_uring.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "ds/config.h"
#include "tests/support/skip.h"
#include "tests/support/spawn_ranks.h"
#include "zero/async_file.h"

using namespace ds;
using namespace ds::zero;

namespace {

bool onTmpfs(const std::string& dir) {
  struct statfs s;
  return ::statfs(dir.c_str(), &s) != 0 || s.f_type == TMPFS_MAGIC || s.f_type == RAMFS_MAGIC;
}

// A writable directory on a disk filesystem (not tmpfs/ramfs): $DS_TEST_NVME_DIR, $TMPDIR, /tmp,
// /var/tmp, the build directory; "" when none.
std::string diskDir() {
  std::vector<std::string> c;
  for (const char* e : {"DS_TEST_NVME_DIR", "TMPDIR"})
    if (const char* v = std::getenv(e)) c.push_back(v);
  for (const char* d : {"/tmp", "/var/tmp", DS_BINARY_DIR}) c.push_back(d);
  for (const auto& d : c)
    if (::access(d.c_str(), W_OK) == 0 && !onTmpfs(d)) return d;
  return "";
}

// Whether the kernel lets this process create an io_uring (seccomp or a sysctl may refuse).
bool kernelAllowsUring() {
  io_uring_params p{};
  long fd = ::syscall(__NR_io_uring_setup, 4, &p);
  if (fd < 0) return false;
  ::close(int(fd));
  return true;
}

// Whether dir's filesystem accepts O_DIRECT.
bool directAllowed(const std::string& dir) {
  const std::string probe = dir + "/dsrun_odirect_probe_" + std::to_string(::getpid());
  int fd = ::open(probe.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_DIRECT | O_CLOEXEC, 0600);
  if (fd >= 0) ::close(fd);
  ::unlink(probe.c_str());
  return fd >= 0;
}

void fill(AlignedBuffer& b, unsigned seed) {
  auto* p = static_cast<unsigned char*>(b.data());
  for (size_t i = 0; i < b.bytes(); ++i) p[i] = static_cast<unsigned char>((i * 131 + seed) >> 3);
}

std::string errorOf(AsyncFile& f, uint64_t t) {
  try {
    f.wait(t);
  } catch (const SystemError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("AsyncFile: io_uring and O_DIRECT on a disk filesystem, bounded requests", "[unit]") {
  const std::string dir = diskDir();
  if (dir.empty())
    DS_SKIP(
        "no writable non-tmpfs directory (set DS_TEST_NVME_DIR): O_DIRECT/io_uring not "
        "checked");
  INFO("directory " << dir);
  const size_t kReq = 16384, kBytes = 40 * 4096;  // 10 requests per full-file I/O
  AsyncFile f(dir + "/async_file_test_" + std::to_string(::getpid()) + ".swp", kBytes,
              AsyncFile::Options{kReq, true});
  if (directAllowed(dir)) CHECK(f.direct());
  else WARN(dir << " refuses O_DIRECT: buffered I/O checked only");
  if (kernelAllowsUring()) {
    if (AsyncFile::uringBuilt()) CHECK(f.usingUring());
    else WARN("built without liburing: the pread/pwrite thread is used");
  } else {
    WARN("the kernel refuses io_uring_setup here: the pread/pwrite thread is used");
    CHECK_FALSE(f.usingUring());
  }
  AlignedBuffer out(kBytes), in(kBytes);
  fill(out, 7);
  const uint64_t r0 = f.requestsIssued();
  f.wait(f.writeAsync(out.data(), kBytes, 0));
  CHECK(f.requestsIssued() - r0 == 10);
  // two tickets in flight at once: pages 1-3 (one request) and 4-39 (9 requests)
  const uint64_t t1 = f.readAsync(static_cast<char*>(in.data()) + 4096, 3 * 4096, 4096);
  const uint64_t t2 = f.readAsync(static_cast<char*>(in.data()) + 4 * 4096, 36 * 4096, 4 * 4096);
  f.waitAll();
  (void)t1;
  (void)t2;
  CHECK(f.requestsIssued() - r0 == 10 + 1 + 9);
  CHECK(std::memcmp(static_cast<char*>(in.data()) + 4096, static_cast<char*>(out.data()) + 4096,
                    3 * 4096) == 0);
  CHECK(std::memcmp(static_cast<char*>(in.data()) + 4 * 4096,
                    static_cast<char*>(out.data()) + 4 * 4096, 36 * 4096) == 0);
}

TEST_CASE("AsyncFile: split requests past the ring depth, uring and thread paths", "[unit]") {
  test::TempDir dir;
  for (bool uring : {true, false}) {
    INFO("uring allowed " << uring);
    const size_t kBytes = 100 * 4096;  // 100 one-page requests: more than the ring's 64
    AsyncFile f(dir.file(uring ? "a.swp" : "b.swp"), kBytes, AsyncFile::Options{4096, uring});
    if (!uring) CHECK_FALSE(f.usingUring());
    AlignedBuffer out(kBytes), in(kBytes);
    fill(out, uring ? 3 : 5);
    f.wait(f.writeAsync(out.data(), kBytes, 0));
    const uint64_t t = f.readAsync(in.data(), kBytes, 0);
    bool seen = false;
    for (int i = 0; i < 100000 && !seen; ++i) seen = f.completed(t);  // polls, never blocks
    f.wait(t);
    CHECK(f.requestsIssued() == 200);
    CHECK(std::memcmp(in.data(), out.data(), kBytes) == 0);
    CHECK(f.completed(t));  // a waited ticket reads as completed
  }
}

TEST_CASE("AsyncFile: DS_ZERO_NO_URING=1 forces the pread/pwrite thread", "[unit]") {
  test::TempDir dir;
  ::setenv("DS_ZERO_NO_URING", "1", 1);
  AsyncFile f(dir.file("c.swp"), 8192);
  ::unsetenv("DS_ZERO_NO_URING");
  CHECK_FALSE(f.usingUring());
  AlignedBuffer out(8192), in(8192);
  fill(out, 11);
  f.wait(f.writeAsync(out.data(), 8192, 0));
  f.wait(f.readAsync(in.data(), 8192, 0));
  CHECK(std::memcmp(in.data(), out.data(), 8192) == 0);
  AsyncFile g(dir.file("d.swp"), 8192);
  if (AsyncFile::uringBuilt() && kernelAllowsUring()) CHECK(g.usingUring());
}

TEST_CASE("AsyncFile: a short read is resubmitted, then reported at end of file", "[unit]") {
  test::TempDir dir;
  for (bool uring : {true, false}) {
    INFO("uring allowed " << uring);
    const std::string path = dir.file(uring ? "e.swp" : "f.swp");
    AsyncFile f(path, 32768, AsyncFile::Options{32768, uring});
    AlignedBuffer buf(32768);
    fill(buf, 1);
    f.wait(f.writeAsync(buf.data(), 32768, 0));
    REQUIRE(::ftruncate(f.fd(), 8192) == 0);  // the file shrinks under the swap layer
    const uint64_t r0 = f.requestsIssued();
    const std::string err = errorOf(f, f.readAsync(buf.data(), 32768, 0));
    CHECK(err.find("short I/O on " + path + " (8192 of 32768 bytes, end of file)") !=
          std::string::npos);
    CHECK(f.requestsIssued() - r0 == 2);  // 8192 bytes came back, the rest was asked again
    // still usable: a read inside the file succeeds
    f.wait(f.readAsync(buf.data(), 8192, 0));
  }
}

TEST_CASE("AsyncFile: a failing request is a SystemError naming the file", "[unit]") {
  test::TempDir dir;
  void* bad = ::mmap(nullptr, 8192, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(bad != MAP_FAILED);
  for (bool uring : {true, false}) {
    INFO("uring allowed " << uring);
    const std::string path = dir.file(uring ? "g.swp" : "h.swp");
    AsyncFile f(path, 16384, AsyncFile::Options{4096, uring});
    // a buffer the kernel cannot touch: EFAULT for the read and for the write
    const std::string rd = errorOf(f, f.readAsync(bad, 8192, 0));
    CHECK(rd.find("nvme swap I/O on " + path) != std::string::npos);
    CHECK(rd.find("Bad address") != std::string::npos);
    const std::string wr = errorOf(f, f.writeAsync(bad, 4096, 4096));
    CHECK(wr.find("Bad address") != std::string::npos);
    AlignedBuffer ok(4096);
    f.wait(f.writeAsync(ok.data(), 4096, 0));  // the file still works
    f.wait(f.readAsync(ok.data(), 4096, 0));
  }
  ::munmap(bad, 8192);
}
