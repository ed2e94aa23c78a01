// Core binding for --bind_cores_to_rank / --bind_core_list (reference/launcher.md §9.3): the
// usable core list is split into equal consecutive slices, slice r for local rank r. Computes
// sets only; the spawner applies them with sched_setaffinity in the child.
// Invariant: slices are disjoint, each non-empty, in local-rank order.
#pragma once

#include <string>
#include <vector>

namespace ds::launcher {

// CPUs this process may run on (sched_getaffinity), ascending.
std::vector<int> allowedCpus();

// Splits `cores` into `localSize` slices of cores.size()/localSize (the remainder unused).
// Throws ConfigError when there are fewer cores than ranks; `source` names the core list.
std::vector<std::vector<int>> coreSlices(const std::vector<int>& cores, int localSize,
                                         const std::string& source);

// Throws ConfigError when `cores` names CPUs outside `allowed` (missing on this host, offline, or
// outside this process's affinity mask): "<source>: cores 2-63 are not available on host H (this
// process may run on cores 0-1)". Checked before any rank starts.
void checkCoresAvailable(const std::vector<int>& cores, const std::vector<int>& allowed,
                         const std::string& source, const std::string& host);

// "0-3,8,10-11" for an ascending list.
std::string formatCoreRanges(const std::vector<int>& cores);

}  // namespace ds::launcher
