// Host memory from /proc/meminfo and the memory cgroups; see host_memory.h.
#include "runtime/device/host_memory.h"

#include <fmt/format.h>

#include <cstdint>
#include <fstream>
#include <optional>
#include <sstream>

namespace ds::runtime {
namespace {

double mib(size_t bytes) { return double(bytes) / 1048576.0; }

// kB value of a "Key:   123 kB" line of a /proc file, in bytes (0 when missing).
size_t procKb(const char* file, const std::string& key) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key + ":", 0) == 0) {
      std::istringstream fields(line.substr(key.size() + 1));
      size_t kb = 0;
      fields >> kb;
      return kb * 1024;
    }
  return 0;
}

// The first line of a file, or nullopt when unreadable.
std::optional<std::string> firstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  return line;
}

// A byte count file ("max" and the v1 "unlimited" page-counter maximum read as nullopt).
std::optional<size_t> bytesFile(const std::string& path) {
  const auto line = firstLine(path);
  if (!line || *line == "max") return std::nullopt;
  std::istringstream fields(*line);
  uint64_t value = 0;
  if (!(fields >> value)) return std::nullopt;
  if (value >= (uint64_t{1} << 60)) return std::nullopt;  // v1's "no limit" (~2^63)
  return size_t(value);
}

// A "key value" line of a memory.stat file (0 when missing).
size_t statValue(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string name;
  uint64_t value = 0;
  while (in >> name >> value)
    if (name == key) return size_t(value);
  return 0;
}

// The cgroup path of the memory controller (v1) or of the unified hierarchy (v2) in a
// /proc/self/cgroup text; nullopt when absent.
std::optional<std::string> cgroupPath(const std::string& text, bool v2) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    const size_t first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    if (v2 && line.compare(0, first, "0") == 0 && controllers.empty()) return path;
    if (!v2) {
      std::istringstream names(controllers);
      std::string name;
      while (std::getline(names, name, ','))
        if (name == "memory") return path;
    }
  }
  return std::nullopt;
}

struct Files {
  const char* limit;
  const char* usage;
  const char* inactiveFile;  // memory.stat key (hierarchical in v1)
};

// Walks from the cgroup's folder up to the mount, keeping the level that leaves the least.
void tightest(const std::string& mount, const std::string& path, const Files& files,
              HostMemory* best) {
  std::string rel = path;
  while (true) {
    const std::string dir = mount + (rel == "/" ? "" : rel);
    const auto limit = bytesFile(dir + "/" + files.limit);
    const auto usage = bytesFile(dir + "/" + files.usage);
    if (limit && usage) {
      const size_t inactive = statValue(dir + "/memory.stat", files.inactiveFile);
      const size_t working = *usage > inactive ? *usage - inactive : 0;
      const size_t left = *limit > working ? *limit - working : 0;
      if (best->availableBytes == 0 || left < best->availableBytes) {
        best->availableBytes = std::max<size_t>(left, 1);
        best->source = fmt::format(
            "the memory cgroup {} (limit {:.0f} MiB, {:.0f} MiB in use less {:.0f} MiB of "
            "inactive page cache)",
            rel, mib(*limit), mib(*usage), mib(inactive));
      }
    }
    if (rel.empty() || rel == "/") break;
    const size_t slash = rel.rfind('/');
    rel = slash == 0 || slash == std::string::npos ? "/" : rel.substr(0, slash);
  }
}

}  // namespace

HostMemory cgroupMemory(const std::string& procSelfCgroup, const std::string& mountV1,
                        const std::string& mountV2) {
  HostMemory out;
  if (const auto path = cgroupPath(procSelfCgroup, false))
    tightest(mountV1, *path,
             {"memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file"}, &out);
  if (const auto path = cgroupPath(procSelfCgroup, true))
    tightest(mountV2, *path, {"memory.max", "memory.current", "inactive_file"}, &out);
  return out;
}

HostMemory hostMemory() {
  HostMemory out;
  out.availableBytes = procKb("/proc/meminfo", "MemAvailable");
  if (out.availableBytes > 0) out.source = "MemAvailable";
  std::ostringstream text;
  text << std::ifstream("/proc/self/cgroup").rdbuf();
  const std::string v2Mount = firstLine("/sys/fs/cgroup/unified/cgroup.controllers")
                                  ? "/sys/fs/cgroup/unified"
                                  : "/sys/fs/cgroup";
  const HostMemory cgroup = cgroupMemory(text.str(), "/sys/fs/cgroup/memory", v2Mount);
  if (cgroup.availableBytes > 0 &&
      (out.availableBytes == 0 || cgroup.availableBytes < out.availableBytes))
    return cgroup;
  return out;
}

size_t residentBytes() { return procKb("/proc/self/status", "VmRSS"); }

}  // namespace ds::runtime
