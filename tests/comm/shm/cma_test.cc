// comm/shm/cma.h: copies through process_vm_readv/writev, here on this process's own memory
// (always permitted) and on a child that has exited: whole transfers, a transfer that runs into
// an unmapped page (the kernel moves the first part, the loop asks again and gets EFAULT), and
// a peer that is gone (ESRCH).
#include "comm/shm/cma.h"

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cerrno>
#include <numeric>
#include <vector>

#include "tests/support/skip.h"

using namespace ds::comm::shm_impl;

TEST_CASE("cma: read and write move every byte", "[unit]") {
  std::vector<int> src(300000), dst(src.size(), 0);
  std::iota(src.begin(), src.end(), 7);
  const int rc = cma::read(::getpid(), src.data(), dst.data(), src.size() * sizeof(int));
  if (rc == EPERM || rc == ENOSYS) DS_SKIP("cross-memory attach is refused on this machine");
  REQUIRE(rc == 0);
  CHECK(dst == src);
  std::vector<int> back(src.size(), 0);
  REQUIRE(cma::write(::getpid(), back.data(), src.data(), src.size() * sizeof(int)) == 0);
  CHECK(back == src);
  CHECK(cma::read(::getpid(), src.data(), dst.data(), 0) == 0);
}

TEST_CASE("cma: a range running into an unmapped page is EFAULT", "[unit]") {
  const long page = ::sysconf(_SC_PAGESIZE);
  void* map = ::mmap(nullptr, static_cast<size_t>(2 * page), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(map != MAP_FAILED);
  char* base = static_cast<char*>(map);
  REQUIRE(::munmap(base + page, static_cast<size_t>(page)) == 0);
  std::vector<char> local(static_cast<size_t>(2 * page));
  const int rc = cma::read(::getpid(), base, local.data(), local.size());
  ::munmap(base, static_cast<size_t>(page));
  if (rc == EPERM || rc == ENOSYS) DS_SKIP("cross-memory attach is refused on this machine");
  CHECK(rc == EFAULT);
}

TEST_CASE("cma: a peer that is gone is ESRCH", "[unit]") {
  pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  REQUIRE(child > 0);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  char word = 0, got = 0;
  CHECK(cma::read(child, &word, &got, 1) == ESRCH);
  CHECK(cma::write(child, &word, &got, 1) == ESRCH);
}
