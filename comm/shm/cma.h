// Cross-memory attach (CMA): copies between this process and a peer process of the same user on
// this host with process_vm_readv / process_vm_writev, straight from or into the peer's own
// buffers (one copy, no staging through the shared segment). The kernel allows it when this
// process may ptrace the peer (same uid and not refused by Yama's ptrace_scope, a seccomp filter
// or a non-dumpable peer without CAP_SYS_PTRACE): probe() tells once per group. Partial
// transfers are continued until every byte moved. Not a collective; thread-safe (no state).
#pragma once

#include <sys/types.h>

#include <cstddef>

namespace ds::comm::shm_impl::cma {

// Copies `bytes` from `remote` in process `pid` to `local` (read) or from `local` to `remote`
// (write). Returns 0, or the errno of the call that failed (EPERM, ESRCH: the peer is gone,
// EFAULT: an address outside the peer's mappings, ENOSYS).
int read(pid_t pid, const void* remote, void* local, size_t bytes);
int write(pid_t pid, void* remote, const void* local, size_t bytes);

}  // namespace ds::comm::shm_impl::cma
