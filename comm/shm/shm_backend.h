// The shared-memory layer over another backend (gloo): when every rank of a group runs on one
// host (the launcher's CROSS_RANK, and the same kernel, /dev/shm and user), its collectives go
// through one shared-memory segment (ShmLink, shm_collectives.h) instead of the inner backend's
// transport; point-to-point messages and dtypes the shm path cannot reduce go to the inner
// backend. A group that spans hosts gets hierarchical collectives (hier_backend.h) when some host
// has 2+ of its ranks and DS_COMM_HIERARCHICAL is on; otherwise it is returned unwrapped. Owns
// the inner backend; collectives run in issue order on one worker thread, those it leaves to the
// inner backend on host buffers included (issued from that thread in their turn).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "comm/backend.h"
#include "comm/store/store.h"

namespace ds::comm {

struct ShmOptions {
  size_t slotBytes = 1 << 20;            // per rank, two pipeline halves (DS_COMM_SHM_SLOT_BYTES)
  std::chrono::milliseconds timeout{0};  // every wait; 0 = ds::defaultTimeout()
  size_t minBytes = 0;  // collectives on fewer bytes (barrier: all, when > 0) go to the inner
                        // backend: the mpi backend keeps Open MPI where it is faster
  bool cma = true;      // single copy by cross-memory attach where probed to work (DS_COMM_SHM_CMA)
  size_t cmaMinBytes = 256 << 10;  // ... for collectives on at least this many bytes
                                   // (DS_COMM_SHM_CMA_MIN_BYTES)
  size_t cmaChunkBytes = 0;  // single-copy reductions' chunk per peer; 0: half the L2 over the
                             // local ranks (DS_COMM_SHM_CMA_CHUNK_BYTES, shm_collectives.h)
  bool mapPeers = true;      // on the single-copy path, a peer's registered buffer is used through
                             // a mapping of it (DS_COMM_SHM_MAP; comm/shared_host_buffer.h)
};

// Whether DS_COMM_SHM leaves the transport on (default yes), and the knob-derived options for a
// layer over `backend` (mpi: minBytes = DS_MPI_SHM_MIN_BYTES).
bool shmEnabledByEnv();
ShmOptions shmOptionsFromEnv(std::chrono::milliseconds timeout, const std::string& backend);

// This process's host identity for grouping: "<CROSS_RANK>|<boot id>|<dev:ino of /dev/shm>|<uid>".
std::string shmHostKey();

// Collective over every rank of inner's group, which all share `store`: each publishes its host
// key; if all match (and there are 2+ ranks), the host's segment is created by group rank 0,
// opened by the others, and unlinked once all have mapped it; returns the wrapping backend.
// Otherwise returns inner as is. Throws ConfigError/CommError/TimeoutError (segment exists,
// /dev/shm full, a rank that never arrives) with nothing left in /dev/shm.
std::unique_ptr<Backend> wrapWithShm(std::unique_ptr<Backend> inner, std::shared_ptr<Store> store,
                                     const ShmOptions& options);

// Whether b is the shared-memory layer (tests, diagnostics).
bool isShmBackend(const Backend& b);
// Whether b is the shared-memory layer with its single-copy (CMA) path on (tests, diagnostics).
bool isShmSingleCopy(const Backend& b);
// How many of its peers' registered regions b (the shared-memory layer) maps now; 0 for any other
// backend (tests, diagnostics). Call between collectives (the layer's worker owns the mappings).
size_t shmPeerRegionsMapped(const Backend& b);

// The protocol of wrapWithShm for a group (e.g. a subgroup) whose store keys live under `prefix`
// of `root`; globalRanks: the world rank of each group rank (for messages).
std::unique_ptr<Backend> wrapGroupWithShm(std::unique_ptr<Backend> inner,
                                          std::shared_ptr<Store> root, const std::string& prefix,
                                          const ShmOptions& options, std::vector<int> globalRanks);

}  // namespace ds::comm
