// process_vm_readv / process_vm_writev with the partial-transfer loop (cma.h). The kernel
// copies page by page and may stop early (a signal, a fault past the first page): the rest is
// asked again from where it stopped; a call that moves nothing is an error (EFAULT when errno
// says nothing).
#include "comm/shm/cma.h"

#include <sys/uio.h>

#include <cerrno>

namespace ds::comm::shm_impl::cma {
namespace {

template <class Call>
int loop(char* remote, char* local, size_t bytes, Call call) {
  while (bytes > 0) {
    struct iovec lv {
      local, bytes
    };
    struct iovec rv {
      remote, bytes
    };
    errno = 0;
    const ssize_t moved = call(&lv, &rv);
    if (moved < 0 && errno == EINTR) continue;
    if (moved <= 0) return errno != 0 ? errno : EFAULT;
    const auto done = static_cast<size_t>(moved);
    remote += done;
    local += done;
    bytes -= done;
  }
  return 0;
}

}  // namespace

int read(pid_t pid, const void* remote, void* local, size_t bytes) {
  return loop(
      const_cast<char*>(static_cast<const char*>(remote)), static_cast<char*>(local), bytes,
      [pid](const iovec* lv, const iovec* rv) { return ::process_vm_readv(pid, lv, 1, rv, 1, 0); });
}

int write(pid_t pid, void* remote, const void* local, size_t bytes) {
  return loop(static_cast<char*>(remote), const_cast<char*>(static_cast<const char*>(local)), bytes,
              [pid](const iovec* lv, const iovec* rv) {
                return ::process_vm_writev(pid, lv, 1, rv, 1, 0);
              });
}

}  // namespace ds::comm::shm_impl::cma
