// Process identity and the same-host liveness check (see peer_process.h).
#include "comm/peer_process.h"

#include <errno.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

namespace ds::comm {
namespace {

std::string firstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// Where this process runs: the kernel boot and the pid namespace its pids belong to.
std::string hostPart() {
  struct stat st {};
  std::string ns = ::stat("/proc/self/ns/pid", &st) == 0 ? std::to_string(st.st_ino) : "";
  std::string boot = firstLine("/proc/sys/kernel/random/boot_id");
  if (boot.empty() || ns.empty()) return "";
  return boot + "|" + ns;
}

bool isZombie(long pid) {
  std::string stat = firstLine("/proc/" + std::to_string(pid) + "/stat");
  auto close = stat.rfind(')');  // "pid (comm) S ...": comm may hold spaces and parentheses
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z';
}

}  // namespace

std::string localProcessId() {
  std::string host = hostPart();
  return host.empty() ? "" : host + "|" + std::to_string(::getpid());
}

bool processGone(const std::string& id) {
  auto bar = id.rfind('|');
  if (bar == std::string::npos || bar == 0) return false;
  std::string host = hostPart();
  if (host.empty() || id.compare(0, bar, host) != 0) return false;
  long pid = 0;
  try {
    pid = std::stol(id.substr(bar + 1));
  } catch (const std::exception&) {
    return false;
  }
  if (pid <= 0) return false;
  if (::kill(static_cast<pid_t>(pid), 0) != 0) return errno == ESRCH;
  return isZombie(pid);
}

}  // namespace ds::comm
