// Hierarchical collectives for a group that spans hosts (issue 18 item 2): the ranks of each host
// form a local group (shared memory when 2+ ranks share the host), one leader per host (its
// lowest group rank) forms the leaders' group over the network, and each collective runs in
// three steps: within the host, among the leaders, back within the host. The bytes that cross
// the network shrink by the ranks per host: a flat ring allreduce sends 2(n-1)/n of the buffer
// over each host's link per rank on it, this sends 2(h-1)/h once per host.
//
//   allreduce       local reduce to the leader; leaders allreduce; local broadcast
//   reduce_scatter  local reduce to the leader; leaders reduce-scatter by host (each host's block
//                   = its ranks' blocks); local broadcast of the host block, each rank keeps its
//   allgather       local allgather into the host's block; leaders allgather the host blocks;
//                   local broadcast of the whole output
//   broadcast       the root's host, then the leaders, then every other host
//
// Every rank ends with the same bytes (the leaders' result, broadcast). The reduction order
// differs from a flat ring's, so floating-point sums agree with the flat path to rounding, and
// exactly where the values are exact (integers); see docs/comm.md. Used for host (CPU) buffers
// of at least DS_COMM_HIER_MIN_BYTES in dtypes the reduction kernels handle, and, for
// reduce_scatter/allgather, when each host's ranks are consecutive group ranks (dsrun places
// them so); everything else (point-to-point, reduce, barrier, device buffers, small messages)
// goes to the flat backend. Collectives run in issue order on one worker thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "comm/backend.h"
#include "comm/shm/shm_backend.h"
#include "comm/store/store.h"

namespace ds::comm {

// Which group ranks share a host: hostRanks[h] in group-rank order, hosts ordered by their
// lowest rank; hostOf[r] = h.
struct HostLayout {
  std::vector<std::vector<int>> hostRanks;
  std::vector<int> hostOf;

  // From every rank's host key (shmHostKey()), indexed by group rank.
  static HostLayout fromKeys(const std::vector<std::string>& keys);
  int hosts() const { return static_cast<int>(hostRanks.size()); }
  // Each host's ranks are consecutive group ranks (reduce_scatter/allgather blocks align).
  bool contiguous() const;
  // Worth a hierarchy: 2+ hosts and some host with 2+ ranks.
  bool worthHierarchy() const;
  std::string describe() const;  // "2 hosts: [0,1] [2,3]"
};

// Whether DS_COMM_HIERARCHICAL leaves hierarchical collectives on (default yes), and
// DS_COMM_HIER_MIN_BYTES.
bool hierEnabledByEnv();
size_t hierMinBytesFromEnv();

// Collective over every rank of `flat`'s group (all share `root`): builds the local groups (each
// wrapped with shared memory under `prefix`/host<h>) and the leaders' group from `flat`'s
// subgroups, and returns the hierarchical backend that owns `flat`.
std::unique_ptr<Backend> makeHierBackend(std::unique_ptr<Backend> flat, std::shared_ptr<Store> root,
                                         const std::string& prefix, const ShmOptions& shm,
                                         const HostLayout& layout,
                                         const std::vector<int>& globalRanks, size_t minBytes);

bool isHierBackend(const Backend& b);

}  // namespace ds::comm
