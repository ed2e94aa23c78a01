// GlooLink: one group's connected gloo context and the rules for using it: slots per collective,
// posts and waits that turn every gloo failure into a CommError naming the peer, and the abort
// protocol that makes all members fail fast once one has seen a peer die (first detector records
// the culprit in the group's store, then closes its connections, which wakes its own waiters).
// Not a collective. Used by the group's worker thread; p2p posts may come from the issuing thread.
#pragma once

#include <gloo/rendezvous/context.h>
#include <gloo/transport/unbound_buffer.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "comm/store/store.h"

namespace ds::comm::gloo_impl {

using UBuf = std::unique_ptr<::gloo::transport::UnboundBuffer>;

// How a message is split into pieces of at most `bytes` each, the last possibly shorter (bytes 0:
// one piece); the pieces of one message share a slot, and gloo matches a slot's receives in
// posting order, so the k-th completion on a buffer is piece k. The same on every member.
struct Pieces {
  size_t bytes = 0;
  size_t count(size_t message) const {
    if (message == 0) return 0;
    return bytes == 0 ? 1 : (message + bytes - 1) / bytes;
  }
  size_t offset(size_t k) const { return k * bytes; }  // k is 0 when bytes is 0
  size_t size(size_t message, size_t k) const {
    return bytes == 0 ? message : std::min(bytes, message - k * bytes);
  }
};

// A persistent receive area for one collective shape (recv_channel.cc): one region per peer,
// reused by every call of the shape, each peer's message arriving as pieces. A call
// posts its receives right after its own sends (channelPost): posted before the sends, or a call
// ahead, the ready-to-receive notices let the peer's data stream in while this rank's sends still
// wait for gloo's pair lock, and the two directions serialize. Every member keys, numbers and
// uses channels identically.
struct RecvChannel {
  uint64_t id = 0;
  uint64_t seq = 0;             // message number of the current call
  std::vector<size_t> bytes;    // per peer: bytes received from it per call (0: none)
  std::vector<size_t> offsets;  // per peer: offset of its region within data
  std::unique_ptr<char[]> data;
  std::vector<UBuf> bufs;  // per peer (null where bytes is 0)
  // How every message to and from this channel is split, so that a receiver can reduce one piece
  // while the next is still arriving.
  Pieces pieces;
  // This call's region for `peer` (valid after channelWait).
  char* region(int peer) { return data.get() + offsets[peer]; }
};

class GlooLink {
 public:
  // ctx is connected; store is this group's (prefixed) store; globalRanks[i] is the world rank of
  // group rank i (used in messages only).
  GlooLink(std::shared_ptr<::gloo::rendezvous::Context> ctx, std::shared_ptr<Store> store,
           std::chrono::milliseconds timeout, std::vector<int> globalRanks);
  ~GlooLink();

  int rank() const { return ctx_->rank; }
  int size() const { return ctx_->size; }
  std::chrono::milliseconds timeout() const { return timeout_; }

  // A fresh block of 2^20 slots for one collective (same sequence on every member).
  uint64_t collectiveSlots();
  // The slot of point-to-point messages with this user tag.
  static uint64_t p2pSlot(int tag);

  UBuf buffer(void* ptr, size_t bytes);
  // Posts (never blocks) and waits; failures become CommError naming `peer` (or the culprit the
  // store records) and leave the group broken. `what` names the collective in messages.
  void send(UBuf& b, int peer, uint64_t slot, size_t offset, size_t bytes, const char* what);
  void recv(UBuf& b, int peer, uint64_t slot, size_t offset, size_t bytes, const char* what);
  void waitSend(UBuf& b, int peer, const char* what);
  void waitRecv(UBuf& b, int peer, const char* what);
  // The same for a message of `bytes` at `offset` of b, as pieces on one slot; the waits wait for
  // all of a message's pieces.
  void sendPieces(const Pieces& pc, UBuf& b, int peer, uint64_t slot, size_t offset, size_t bytes,
                  const char* what);
  void recvPieces(const Pieces& pc, UBuf& b, int peer, uint64_t slot, size_t offset, size_t bytes,
                  const char* what);
  void waitSendPieces(const Pieces& pc, UBuf& b, int peer, size_t bytes, const char* what);
  void waitRecvPieces(const Pieces& pc, UBuf& b, int peer, size_t bytes, const char* what);

  // Reusable scratch memory for the worker's algorithms (index 0: staging copy, 1: ring receive
  // block, 2: direct-allreduce copies). Kept between collectives: fresh pages per call cost more
  // than the transfer itself at 100 MiB sizes. Contents are unspecified; grows, never shrinks.
  char* scratch(int index, size_t bytes);

  // The receive channel for `key` (a shape every member passes alike, e.g. {kind, elem size,
  // counts...}); recvBytes[p]: what peer p sends this rank per call. Created on first use.
  // nullptr when the cache is full (kMaxChannels, or kMaxChannelBytes of shapeBytes, a
  // rank-independent size): every member then decides alike, and the caller runs an uncached
  // algorithm. pieces (piece size a multiple of the element size, the same on every member): how
  // messages travel. Per call: sendPieces(c.pieces, ..., channelSlot(c), ...) to each peer, then
  // channelPost, then channelWaitPiece (in order, k = 0, 1, ...) or channelWait per peer, then
  // finishChannel (every member, every call, even with nothing sent or received).
  RecvChannel* channel(const std::vector<size_t>& key, const std::vector<size_t>& recvBytes,
                       size_t shapeBytes, Pieces pieces = {});
  static uint64_t channelSlot(const RecvChannel& c);
  // Posts this call's receives from every peer that sends this rank something.
  void channelPost(RecvChannel& c, const char* what);
  char* channelWait(RecvChannel& c, int peer, const char* what);
  // Piece k of peer's message of this call (a pointer to the piece in peer's region).
  char* channelWaitPiece(RecvChannel& c, int peer, size_t k, const char* what);
  void finishChannel(RecvChannel& c);
  static constexpr size_t kMaxChannels = 64;
  static constexpr size_t kMaxChannelBytes = size_t{32} << 20;

  // Throws the failure that broke this group, if any (every collective starts with it).
  void checkUsable() const;
  // Breaks the group now: records nothing, closes every connection (teardown with work pending).
  void closeConnections();
  // Whether another member has recorded a failure in the store (the watchdog's poll; a store
  // that cannot be reached counts as no).
  bool abortRecorded();
  // Records that groupRank failed (detail says how), unless a failure is already recorded: the
  // watchdog's own finding, named later by fail() on every member. False if the store is gone.
  bool recordAbort(int groupRank, const std::string& detail);
  // Wakes the wait in progress (and fails every later one): closing our own connections does not
  // wake our own waiters in gloo, only the peers'. Thread-safe (the watchdog calls it).
  void abortWaits();

 private:
  [[noreturn]] void fail(int peer, const char* what, const std::string& detail);
  std::string describe(int groupRank) const;

  std::shared_ptr<::gloo::rendezvous::Context> ctx_;
  std::shared_ptr<Store> store_;
  std::chrono::milliseconds timeout_;
  std::vector<int> globalRanks_;
  uint64_t nextCollective_ = 0;
  mutable std::mutex mu_;
  std::exception_ptr broken_;
  std::mutex waitMu_;
  ::gloo::transport::UnboundBuffer* waiting_ = nullptr;
  bool waitingRecv_ = false;
  bool aborted_ = false;
  // Registers b as the buffer being waited on; false if abortWaits() already ran.
  bool beginWait(::gloo::transport::UnboundBuffer* b, bool isRecv);
  void endWait();
  struct Scratch {
    std::unique_ptr<char[]> data;
    size_t bytes = 0;
  };
  Scratch scratch_[3];
  // Declared after ctx_: destroyed (posted receives and all) before the context.
  std::map<std::vector<size_t>, RecvChannel> channels_;
  size_t channelBytes_ = 0;
};

}  // namespace ds::comm::gloo_impl
