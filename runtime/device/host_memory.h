// Host memory: how much more this process may allocate on its host, for the memory-fit check
// (memory_fit.h): /proc/meminfo's MemAvailable, or less where a memory cgroup above the process
// (v1 or v2: a container's, a Slurm job's, a systemd slice's) leaves less under its limit. Reads
// files only; not a collective, and no accounting of our own buffers (zero::MemoryReport).
#pragma once

#include <cstddef>
#include <string>

namespace ds::runtime {

struct HostMemory {
  size_t availableBytes = 0;  // 0: unknown (nothing readable)
  // Where the figure comes from: "MemAvailable", or the cgroup, its limit and what it holds.
  std::string source;
};

// The smaller of MemAvailable and, for every memory cgroup from this process's up to its
// hierarchy's root, limit - working set (usage less the inactive page cache the kernel reclaims
// first, as the kubelet counts it).
HostMemory hostMemory();

// This process's resident set (VmRSS) in bytes (0 when unreadable).
size_t residentBytes();

// The cgroup part alone, over explicit files (tests): `procSelfCgroup` is /proc/self/cgroup's
// text, `mountV1` the v1 memory hierarchy's mount (/sys/fs/cgroup/memory), `mountV2` the unified
// hierarchy's (/sys/fs/cgroup or /sys/fs/cgroup/unified). availableBytes 0 when no limit applies.
HostMemory cgroupMemory(const std::string& procSelfCgroup, const std::string& mountV1,
                        const std::string& mountV2);

}  // namespace ds::runtime
