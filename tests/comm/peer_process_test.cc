// peer_process: the same-host liveness check the gloo and nccl watchdogs use to name a dead member.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>

#include "comm/peer_process.h"

using ds::comm::localProcessId;
using ds::comm::processGone;

namespace {

// The id a forked child would publish: ours with its pid.
std::string idOf(pid_t pid) {
  std::string self = localProcessId();
  return self.substr(0, self.rfind('|') + 1) + std::to_string(pid);
}

}  // namespace

TEST_CASE("peer_process: a live process is not gone, a dead or zombie one is", "[unit]") {
  std::string self = localProcessId();
  REQUIRE_FALSE(self.empty());
  CHECK(self.substr(self.rfind('|') + 1) == std::to_string(::getpid()));
  CHECK_FALSE(processGone(self));

  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::pause();
    ::_exit(0);
  }
  CHECK_FALSE(processGone(idOf(child)));  // alive (sleeping in pause)
  ::kill(child, SIGKILL);
  // Not reaped yet: a zombie, which counts as gone. Bounded wait for the kernel to mark it.
  bool zombie = false;
  for (int i = 0; i < 2000 && !zombie; ++i) {
    zombie = processGone(idOf(child));
    if (!zombie) ::usleep(1000);
  }
  CHECK(zombie);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(processGone(idOf(child)));  // reaped: no such pid
}

TEST_CASE("peer_process: another host, another namespace or a malformed id is never judged",
          "[unit]") {
  CHECK_FALSE(processGone(""));
  CHECK_FALSE(processGone("garbage"));
  CHECK_FALSE(processGone(idOf(0)));
  CHECK_FALSE(processGone(idOf(-5)));
  std::string self = localProcessId();
  std::string pid = self.substr(self.rfind('|') + 1);
  // A process on another kernel (other boot id) with a pid that does not exist here.
  CHECK_FALSE(processGone("00000000-0000-0000-0000-000000000000|4026531836|999999999"));
  // Same boot, other pid namespace: not comparable.
  std::string boot = self.substr(0, self.find('|'));
  CHECK_FALSE(processGone(boot + "|1|999999999"));
  CHECK(processGone(self.substr(0, self.rfind('|') + 1) + "999999999") ==
        (::kill(999999999, 0) != 0));
}
