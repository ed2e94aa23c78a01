// GlooLink: error mapping and the abort protocol. gloo reports a dead peer as IoException on the
// pair to it ("Connection closed by peer"); members not talking to that peer only notice when a
// neighbour closes its connections after failing, so the first detector writes "abort" =
// "<rank>|<detail>" (compareSet: first writer wins) before closing, and later detectors name the
// recorded rank. If the store itself is gone, the directly observed peer is named.
#include "comm/gloo/gloo_link.h"

#include <gloo/common/error.h>

#include "core/error.h"
#include "core/log.h"

namespace ds::comm::gloo_impl {
namespace {

constexpr uint64_t kCollectivePrefix = uint64_t{1} << 62;
constexpr uint64_t kP2PPrefix = uint64_t{2} << 62;
constexpr int kSlotBits = 20;
constexpr const char* kAbortKey = "abort";

}  // namespace

GlooLink::GlooLink(std::shared_ptr<::gloo::rendezvous::Context> ctx, std::shared_ptr<Store> store,
                   std::chrono::milliseconds timeout, std::vector<int> globalRanks)
    : ctx_(std::move(ctx)),
      store_(std::move(store)),
      timeout_(timeout),
      globalRanks_(std::move(globalRanks)) {}

GlooLink::~GlooLink() = default;

uint64_t GlooLink::collectiveSlots() {
  uint64_t base = kCollectivePrefix | ((nextCollective_++ % (uint64_t{1} << 40)) << kSlotBits);
  return base;
}

uint64_t GlooLink::p2pSlot(int tag) {
  return kP2PPrefix | (static_cast<uint64_t>(static_cast<uint32_t>(tag)) << kSlotBits);
}

char* GlooLink::scratch(int index, size_t bytes) {
  Scratch& s = scratch_[index];
  if (s.bytes < bytes) {
    s.data.reset();
    s.data.reset(new char[bytes]);  // uninitialized on purpose
    s.bytes = bytes;
  }
  return s.data.get();
}

UBuf GlooLink::buffer(void* ptr, size_t bytes) { return ctx_->createUnboundBuffer(ptr, bytes); }

std::string GlooLink::describe(int groupRank) const {
  if (groupRank < 0 || groupRank >= static_cast<int>(globalRanks_.size())) return "unknown rank";
  int g = globalRanks_[groupRank];
  if (g == groupRank) return fmt::format("rank {}", g);
  return fmt::format("rank {} (group rank {})", g, groupRank);
}

void GlooLink::checkUsable() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (broken_) std::rethrow_exception(broken_);
}

void GlooLink::closeConnections() {
  try {
    ctx_->closeConnections();
  } catch (const std::exception& e) {
    DS_LOG_WARN("gloo", "closing connections: {}", e.what());
  }
}

bool GlooLink::abortRecorded() {
  try {
    return store_->check({kAbortKey});
  } catch (const std::exception&) {
    return false;
  }
}

bool GlooLink::recordAbort(int groupRank, const std::string& detail) {
  try {
    std::string mine = fmt::format("{}|{}", groupRank, detail);
    store_->compareSet(kAbortKey, {}, Bytes(mine.begin(), mine.end()));
    return true;
  } catch (const std::exception& e) {
    DS_LOG_WARN("gloo", "could not record the failure of {} in the store: {}", describe(groupRank),
                e.what());
    return false;
  }
}

void GlooLink::abortWaits() {
  std::lock_guard<std::mutex> lock(waitMu_);
  aborted_ = true;
  if (waiting_ == nullptr) return;
  if (waitingRecv_) {
    waiting_->abortWaitRecv();
  } else {
    waiting_->abortWaitSend();
  }
}

bool GlooLink::beginWait(::gloo::transport::UnboundBuffer* b, bool isRecv) {
  std::lock_guard<std::mutex> lock(waitMu_);
  if (aborted_) return false;
  waiting_ = b;
  waitingRecv_ = isRecv;
  return true;
}

void GlooLink::endWait() {
  std::lock_guard<std::mutex> lock(waitMu_);
  waiting_ = nullptr;
}

void GlooLink::fail(int peer, const char* what, const std::string& detail) {
  // Who failed first? Record our observation unless someone already recorded theirs.
  int culprit = peer;
  std::string culpritDetail = detail;
  try {
    std::string mine = fmt::format("{}|{}", peer, detail);
    Bytes stored = store_->compareSet(kAbortKey, {}, Bytes(mine.begin(), mine.end()));
    std::string s(stored.begin(), stored.end());
    auto bar = s.find('|');
    if (bar != std::string::npos && s != mine) {
      culprit = std::stoi(s.substr(0, bar));
      culpritDetail =
          fmt::format("{} (seen first by another member; here: {})", s.substr(bar + 1), detail);
    }
  } catch (const std::exception& e) {
    DS_LOG_WARN("gloo", "could not record the failure in the store: {}", e.what());
  }
  closeConnections();
  int myGlobal = globalRanks_.empty() ? rank() : globalRanks_[rank()];
  int culpritGlobal = culprit >= 0 && culprit < static_cast<int>(globalRanks_.size())
                          ? globalRanks_[culprit]
                          : culprit;
  auto err = std::make_exception_ptr(
      CommError(fmt::format("gloo {} on rank {} failed: peer {} is gone or failed: {}", what,
                            myGlobal, describe(culprit), culpritDetail),
                culpritGlobal));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!broken_) broken_ = err;
  }
  std::rethrow_exception(err);
}

void GlooLink::send(UBuf& b, int peer, uint64_t slot, size_t offset, size_t bytes,
                    const char* what) {
  try {
    b->send(peer, slot, offset, bytes);
  } catch (const std::exception& e) {
    fail(peer, what, fmt::format("sending {} bytes to {}: {}", bytes, describe(peer), e.what()));
  }
}

void GlooLink::recv(UBuf& b, int peer, uint64_t slot, size_t offset, size_t bytes,
                    const char* what) {
  try {
    b->recv(peer, slot, offset, bytes);
  } catch (const std::exception& e) {
    fail(peer, what, fmt::format("posting a receive from {}: {}", describe(peer), e.what()));
  }
}

void GlooLink::waitSend(UBuf& b, int peer, const char* what) {
  bool ok = false;
  try {
    ok = beginWait(b.get(), false) && b->waitSend(timeout_);
    endWait();
  } catch (const std::exception& e) {
    endWait();
    fail(peer, what,
         fmt::format("waiting up to {} ms to send to {}: {}", timeout_.count(), describe(peer),
                     e.what()));
  }
  if (!ok)
    fail(peer, what, fmt::format("sending to {}: aborted, another member failed", describe(peer)));
}

void GlooLink::waitRecv(UBuf& b, int peer, const char* what) {
  bool ok = false;
  try {
    ok = beginWait(b.get(), true) && b->waitRecv(timeout_);
    endWait();
  } catch (const std::exception& e) {
    endWait();
    fail(peer, what,
         fmt::format("waiting up to {} ms for data from {}: {}", timeout_.count(), describe(peer),
                     e.what()));
  }
  if (!ok)
    fail(peer, what,
         fmt::format("receiving from {}: aborted, another member failed", describe(peer)));
}

void GlooLink::sendPieces(const Pieces& pc, UBuf& b, int peer, uint64_t slot, size_t offset,
                          size_t bytes, const char* what) {
  for (size_t k = 0; k < pc.count(bytes); ++k)
    send(b, peer, slot, offset + pc.offset(k), pc.size(bytes, k), what);
}

void GlooLink::recvPieces(const Pieces& pc, UBuf& b, int peer, uint64_t slot, size_t offset,
                          size_t bytes, const char* what) {
  for (size_t k = 0; k < pc.count(bytes); ++k)
    recv(b, peer, slot, offset + pc.offset(k), pc.size(bytes, k), what);
}

void GlooLink::waitSendPieces(const Pieces& pc, UBuf& b, int peer, size_t bytes, const char* what) {
  for (size_t k = 0; k < pc.count(bytes); ++k) waitSend(b, peer, what);
}

void GlooLink::waitRecvPieces(const Pieces& pc, UBuf& b, int peer, size_t bytes, const char* what) {
  for (size_t k = 0; k < pc.count(bytes); ++k) waitRecv(b, peer, what);
}

}  // namespace ds::comm::gloo_impl
