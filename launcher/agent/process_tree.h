// Descendants of processes, found by scanning /proc for parent links: for killing what left its
// parent's process group and session (pdsh runs every ssh client under setsid, so killing pdsh's
// group misses them). Not atomic: a process may fork or exit during the scan, so callers stop the
// roots first (SIGSTOP) where that matters. Invariant: no heap allocation and only raw syscalls,
// because the GroupGuard watchdog calls it in a forked child.
#pragma once

#include <sys/types.h>

#include <cstddef>

namespace ds::launcher {

// Scratch space for one scan (about 300 KiB: keep it static or on the heap, not on the stack).
struct ProcTable {
  static constexpr size_t kMax = 32768;
  pid_t pid[kMax];
  pid_t ppid[kMax];
  size_t count = 0;
  char dents[8192];
  char stat[512];
};

// Writes the pids of every live descendant of roots[0..nRoots) (children, their children, ...,
// not the roots themselves) to out[0..cap); returns how many. 0 when /proc cannot be read.
size_t findDescendants(const pid_t* roots, size_t nRoots, ProcTable* table, pid_t* out, size_t cap);

// kill(sig) to every descendant of root; returns how many were signalled.
size_t signalDescendants(pid_t root, int sig);

}  // namespace ds::launcher
