// DecodeLink: how `dsrt serve` on T tensor-parallel ranks keeps every rank's Decoder in step.
// Rank 0 (the leader) owns the HTTP server and the BatchScheduler; before each Decoder call it
// broadcasts one DecodeOp (the slots to reset, then the forward's slots, token ids and which rows
// need logits), and every follower makes the same call on its own Decoder
// (runtime/serve/follower.h). Sampling, stop tokens and limits stay on the leader: the logits are
// all-gathered, so the chosen ids reach the followers as the next op's tokens, and a request's
// settings never need to. When idle the leader sends a heartbeat at least every heartbeatInterval,
// so a follower's wait for the next op has a timeout (followerTimeout) even while no request comes
// for hours. Wire: an int32 header {kind, sequence, resets, rows, hasLogitRows}, then (unless
// empty) one int32 payload [resets..., slots..., tokens..., logitRows 0/1...]. Followers check the
// sequence, so a lost or extra op is an InternalError naming both numbers, not silently wrong text.
// Every rank of the group must use its link in the same order; one thread per rank. After a
// failed or timed-out op the link is broken (InternalError on use): the ranks are out of step.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace ds::comm {
class ProcessGroup;
}

namespace ds::runtime::serve {

struct DecodeOp {
  enum Kind : int32_t { kForward = 1, kHeartbeat = 2, kStop = 3 };
  Kind kind = kHeartbeat;
  std::vector<int32_t> resets;  // slots emptied (KvCache length 0) before the forward
  std::vector<int32_t> slots, tokens;
  std::vector<bool> logitRows;  // empty: every row
};

struct DecodeLinkOptions {
  std::chrono::milliseconds heartbeatInterval{1000};
  // How long a follower waits for the leader's next op (0: ds::defaultTimeout(), DS_TIMEOUT).
  std::chrono::milliseconds followerTimeout{0};
};

class DecodeLink {
 public:
  // group: every serving rank; rank 0 leads. Must outlive the link.
  DecodeLink(comm::ProcessGroup& group, const DecodeLinkOptions& opts = {});

  comm::ProcessGroup& group() const { return group_; }
  bool leader() const;
  // Leader: broadcasts op (CommError naming the op and the group when a follower is gone).
  void send(const DecodeOp& op);
  // Leader: a heartbeat when nothing was sent for heartbeatInterval.
  void heartbeatIfIdle();
  // Follower: the leader's next op. TimeoutError naming rank 0 and the wait when none comes within
  // followerTimeout; CommError when the leader is gone.
  DecodeOp receive();
  uint64_t sent() const { return sequence_; }  // ops sent (leader) or received (follower)

 private:
  void broadcast(int32_t* data, size_t count, const char* what);
  void checkUsable() const;

  comm::ProcessGroup& group_;
  DecodeLinkOptions opts_;
  uint64_t sequence_ = 0;
  std::chrono::steady_clock::time_point lastSent_;
  // The broadcast buffers are members: a wait that timed out leaves its broadcast with the
  // backend, which may still write here later, so they live as long as the link (which is then
  // broken: every further call throws).
  std::array<int32_t, 5> header_{};  // kind, sequence, resets, rows, hasLogitRows
  std::vector<int32_t> buf_;
  bool broken_ = false;
};

const char* decodeOpName(DecodeOp::Kind kind);

}  // namespace ds::runtime::serve
