// DecodeLink (see decode_link.h).
#include "runtime/serve/decode_link.h"

#include <fmt/format.h>

#include "comm/process_group.h"
#include "core/env.h"
#include "core/error.h"

namespace ds::runtime::serve {
const char* decodeOpName(DecodeOp::Kind kind) {
  switch (kind) {
    case DecodeOp::kForward: return "forward";
    case DecodeOp::kHeartbeat: return "heartbeat";
    case DecodeOp::kStop: return "stop";
  }
  return "unknown";
}

DecodeLink::DecodeLink(comm::ProcessGroup& group, const DecodeLinkOptions& opts)
    : group_(group), opts_(opts), lastSent_(std::chrono::steady_clock::now()) {
  if (opts_.followerTimeout.count() <= 0) opts_.followerTimeout = defaultTimeout();
}

bool DecodeLink::leader() const { return group_.rank() == 0; }

void DecodeLink::broadcast(int32_t* data, size_t count, const char* what) {
  const comm::BufferView view{data, count, DType::kI32, comm::Device::kCpu};
  const auto timeout = leader() ? defaultTimeout() : opts_.followerTimeout;
  const std::string who =
      leader() ? fmt::format("serve: rank 0 sending op {} ({}) to the {} follower ranks", sequence_,
                             what, group_.size() - 1)
               : fmt::format(
                     "serve: rank {} waiting for op {} ({}) from rank 0 (the leader sends "
                     "one at least every {} ms, a heartbeat when idle)",
                     group_.rank(), sequence_, what, opts_.heartbeatInterval.count());
  try {
    group_.broadcast(view, 0)->wait(timeout);
  } catch (const TimeoutError& e) {
    broken_ = true;
    throw TimeoutError(fmt::format("{}: nothing within {} ms: {}", who, timeout.count(), e.what()));
  } catch (const Error& e) {
    broken_ = true;
    throw CommError(fmt::format("{}: {}", who, e.what()));
  }
}

void DecodeLink::checkUsable() const {
  if (broken_)
    throw InternalError(fmt::format(
        "serve: rank {}: the decode link is unusable after its op {} failed (the ranks are out "
        "of step)",
        group_.rank(), sequence_));
}

void DecodeLink::send(const DecodeOp& op) {
  if (!leader()) throw InternalError("DecodeLink::send on a follower rank");
  checkUsable();
  const size_t rows = op.slots.size();
  if (op.tokens.size() != rows || (!op.logitRows.empty() && op.logitRows.size() != rows))
    throw InternalError(fmt::format("DecodeLink::send: {} slots, {} tokens, {} logit rows", rows,
                                    op.tokens.size(), op.logitRows.size()));
  header_ = {op.kind, static_cast<int32_t>(sequence_), static_cast<int32_t>(op.resets.size()),
             static_cast<int32_t>(rows), op.logitRows.empty() ? 0 : 1};
  broadcast(header_.data(), header_.size(), decodeOpName(op.kind));
  buf_.assign(op.resets.begin(), op.resets.end());
  buf_.insert(buf_.end(), op.slots.begin(), op.slots.end());
  buf_.insert(buf_.end(), op.tokens.begin(), op.tokens.end());
  for (bool keep : op.logitRows) buf_.push_back(keep ? 1 : 0);
  if (!buf_.empty()) broadcast(buf_.data(), buf_.size(), "payload");
  ++sequence_;
  lastSent_ = std::chrono::steady_clock::now();
}

void DecodeLink::heartbeatIfIdle() {
  if (std::chrono::steady_clock::now() - lastSent_ >= opts_.heartbeatInterval) send({});
}

DecodeOp DecodeLink::receive() {
  if (leader()) throw InternalError("DecodeLink::receive on rank 0 (the leader)");
  checkUsable();
  header_.fill(0);
  broadcast(header_.data(), header_.size(), "next op");
  const auto& header = header_;
  const auto kind = static_cast<DecodeOp::Kind>(header[0]);
  if (kind != DecodeOp::kForward && kind != DecodeOp::kHeartbeat && kind != DecodeOp::kStop)
    throw InternalError(fmt::format("serve: rank {}: op {} from rank 0 has kind {}, expected 1..3",
                                    group_.rank(), sequence_, header[0]));
  if (static_cast<uint32_t>(header[1]) != static_cast<uint32_t>(sequence_))
    throw InternalError(fmt::format(
        "serve: rank {} expected op {} from rank 0 but got op {}: the ranks are out of step",
        group_.rank(), sequence_, header[1]));
  if (header[2] < 0 || header[3] < 0)
    throw InternalError(fmt::format("serve: rank {}: op {} has {} resets and {} rows",
                                    group_.rank(), sequence_, header[2], header[3]));
  const auto resets = static_cast<size_t>(header[2]), rows = static_cast<size_t>(header[3]);
  const size_t logitRows = header[4] != 0 ? rows : 0;
  buf_.assign(resets + 2 * rows + logitRows, 0);
  if (!buf_.empty()) broadcast(buf_.data(), buf_.size(), "payload");
  DecodeOp op;
  op.kind = kind;
  auto at = buf_.begin();
  op.resets.assign(at, at + static_cast<ptrdiff_t>(resets));
  at += static_cast<ptrdiff_t>(resets);
  op.slots.assign(at, at + static_cast<ptrdiff_t>(rows));
  at += static_cast<ptrdiff_t>(rows);
  op.tokens.assign(at, at + static_cast<ptrdiff_t>(rows));
  at += static_cast<ptrdiff_t>(rows);
  for (size_t i = 0; i < logitRows; ++i) op.logitRows.push_back(at[static_cast<ptrdiff_t>(i)] != 0);
  ++sequence_;
  return op;
}

}  // namespace ds::runtime::serve
