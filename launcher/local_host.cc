// Local machine facts (see local_host.h).
#include "launcher/local_host.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <unistd.h>

#include <climits>
#include <cstring>

#include "core/error.h"
#include "launcher/launcher_knobs.h"

namespace ds::launcher {

bool isLocalHost(const std::string& hostIn) {
  std::string host =
      hostIn.substr(hostIn.find('@') == std::string::npos ? 0 : hostIn.find('@') + 1);
  if (host == "localhost" || host == "127.0.0.1" || host == "::1") return true;
  char name[HOST_NAME_MAX + 1] = {};
  if (::gethostname(name, sizeof(name) - 1) == 0) {
    std::string full = name;
    if (host == full || host == full.substr(0, full.find('.'))) return true;
  }
  struct ifaddrs* ifs = nullptr;
  if (::getifaddrs(&ifs) != 0) return false;
  bool found = false;
  for (auto* i = ifs; i && !found; i = i->ifa_next) {
    if (!i->ifa_addr) continue;
    char buf[INET6_ADDRSTRLEN] = {};
    if (i->ifa_addr->sa_family == AF_INET)
      ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, buf, sizeof buf);
    else if (i->ifa_addr->sa_family == AF_INET6)
      ::inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr, buf,
                  sizeof buf);
    found = buf[0] && host == buf;
  }
  ::freeifaddrs(ifs);
  return found;
}

int localGpuCount() {
  DIR* d = ::opendir("/dev");
  if (!d) return 0;
  int n = 0;
  while (dirent* e = ::readdir(d)) {
    const char* s = e->d_name;
    if (std::strncmp(s, "nvidia", 6) != 0 || !s[6]) continue;
    bool digits = true;
    for (const char* p = s + 6; *p; ++p) digits = digits && *p >= '0' && *p <= '9';
    n += digits ? 1 : 0;
  }
  ::closedir(d);
  return n;
}

bool isResolvable(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  addrinfo* res = nullptr;
  int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (res) ::freeaddrinfo(res);
  return rc == 0;
}

std::string findOnPath(const std::string& name, const EnvMap& env) {
  if (name.empty()) return "";
  if (name.find('/') != std::string::npos) return ::access(name.c_str(), X_OK) == 0 ? name : "";
  std::string path = knobString(knobs::kPath, env).value_or(std::string(knobs::kPath.dflt));
  size_t start = 0;
  while (start <= path.size()) {
    size_t colon = path.find(':', start);
    std::string dir =
        path.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    std::string full = (dir.empty() ? "." : dir) + "/" + name;
    if (::access(full.c_str(), X_OK) == 0) return full;
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return "";
}

std::string selfExePath() {
  char buf[PATH_MAX + 1] = {};
  ssize_t n = ::readlink("/proc/self/exe", buf, PATH_MAX);
  if (n <= 0) throw SystemError("readlink /proc/self/exe", errno);
  return std::string(buf, static_cast<size_t>(n));
}

std::string selfExeDir() {
  std::string p = selfExePath();
  return p.substr(0, p.rfind('/'));
}

}  // namespace ds::launcher
