// NcclComm: one group's communicator and what may touch it. NCCL allows one thread at a time on
// a communicator, and ncclCommAbort frees it, so every call on it (enqueue, async-error poll,
// abort) happens under mu(). abort() is the single way a group breaks: it settles every pending
// Work (completed if its event already fired, else failed with the reason), then aborts the
// communicator; later collectives fail with the same reason.
#pragma once

#include <nccl.h>

#include <exception>
#include <memory>
#include <mutex>
#include <vector>

namespace ds::comm::nccl_impl {

class NcclWork;

class NcclComm {
 public:
  explicit NcclComm(ncclComm_t comm) : comm_(comm) {}
  ~NcclComm();  // ncclCommDestroy unless aborted
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  std::mutex& mu() { return mu_; }
  // The rest require mu() held.
  ncclComm_t get() const { return comm_; }
  bool aborted() const { return aborted_; }
  std::exception_ptr reason() const { return reason_; }
  void track(const std::shared_ptr<NcclWork>& w);
  bool anyPendingLocked();
  void abortLocked(std::exception_ptr reason);

  // Locking forms (the watchdog's callbacks).
  bool anyPending();
  // Never blocks: a lock held by an enqueue in progress counts as pending (so the watchdog
  // thread keeps beating whatever the issuing thread does).
  bool tryAnyPending();
  void abort(std::exception_ptr reason);

 private:
  std::mutex mu_;
  ncclComm_t comm_;
  bool aborted_ = false;
  std::exception_ptr reason_;
  std::vector<std::weak_ptr<NcclWork>> pending_;
};

}  // namespace ds::comm::nccl_impl
