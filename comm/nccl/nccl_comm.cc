// NcclComm: pending-Work bookkeeping and the abort that settles it.
#include "comm/nccl/nccl_comm.h"

#include "comm/nccl/nccl_work.h"

namespace ds::comm::nccl_impl {

NcclComm::~NcclComm() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!aborted_) ncclCommDestroy(comm_);
}

void NcclComm::track(const std::shared_ptr<NcclWork>& w) {
  // Drop the handles that are gone or settled, so the list stays as short as the work in flight.
  std::erase_if(pending_, [](const std::weak_ptr<NcclWork>& p) {
    auto work = p.lock();
    return !work || work->isCompleted();
  });
  pending_.push_back(w);
}

bool NcclComm::anyPendingLocked() {
  bool any = false;
  std::erase_if(pending_, [&](const std::weak_ptr<NcclWork>& p) {
    auto w = p.lock();
    if (!w || w->pollLocked()) return true;
    any = true;
    return false;
  });
  return any;
}

void NcclComm::abortLocked(std::exception_ptr reason) {
  if (aborted_) return;
  aborted_ = true;
  reason_ = reason;
  for (auto& p : pending_)
    if (auto w = p.lock()) w->settleLocked(reason);
  pending_.clear();
  ncclCommAbort(comm_);
}

bool NcclComm::anyPending() {
  std::lock_guard<std::mutex> lock(mu_);
  return !aborted_ && anyPendingLocked();
}

bool NcclComm::tryAnyPending() {
  std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
  if (!lock.owns_lock()) return true;
  return !aborted_ && anyPendingLocked();
}

void NcclComm::abort(std::exception_ptr reason) {
  std::lock_guard<std::mutex> lock(mu_);
  abortLocked(std::move(reason));
}

}  // namespace ds::comm::nccl_impl
