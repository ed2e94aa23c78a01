// StoreSession: authentication then dispatch of each request onto the shared HashStore.
#include "comm/store/store_session.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/log.h"

namespace ds::comm {

using proto::Op;
using proto::Request;
using proto::Response;
using proto::Status;

bool tokensEqual(const std::string& a, const std::string& b) {
  unsigned diff = a.size() == b.size() ? 0u : 1u;
  size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    unsigned char x = i < a.size() ? a[i] : 0, y = i < b.size() ? b[i] : 0;
    diff |= x ^ y;
  }
  return diff == 0;
}

StoreSession::StoreSession(HashStore& data, const std::string& token, std::string peer,
                           std::chrono::milliseconds maxWait)
    : data_(data), token_(token), peer_(std::move(peer)), maxWait_(maxWait) {}

Bytes StoreSession::error(Op op, const std::string& msg, bool close) {
  Response r;
  r.status = Status::kError;
  r.message = msg;
  if (close) closing_ = true;
  return proto::encodeResponse(op, r);
}

Bytes StoreSession::refuseFrame(const std::string& why) {
  DS_LOG_WARN("store", "closing store connection from {}: {}", peer_, why);
  return error(Op::kHello, why, true);
}

Bytes StoreSession::hello(const Request& r) {
  if (r.magic != proto::kMagic || r.version != proto::kVersion)
    return error(Op::kHello,
                 fmt::format("store protocol mismatch: client sent magic {:#x} version {}, "
                             "server speaks magic {:#x} version {}",
                             r.magic, r.version, proto::kMagic, proto::kVersion),
                 true);
  if (r.token.empty() || !tokensEqual(r.token, token_)) {
    const char* why = r.token.empty() ? "no job token presented" : "wrong job token";
    DS_LOG_WARN("store", "refused store connection from {}: {}", peer_, why);
    return error(Op::kHello,
                 fmt::format("job token rejected by the store ({}); the rank must carry the "
                             "job's DS_JOB_TOKEN",
                             why),
                 true);
  }
  authenticated_ = true;
  return proto::encodeResponse(Op::kHello, Response{});
}

Bytes StoreSession::onFrame(const uint8_t* body, size_t size) {
  Request r;
  try {
    r = proto::parseRequest(body, size);
  } catch (const proto::ProtocolError& e) {
    DS_LOG_WARN("store", "closing store connection from {}: {}", peer_, e.what());
    return error(Op::kHello, e.what(), true);
  }
  if (r.op == Op::kHello) return hello(r);
  if (!authenticated_) {
    DS_LOG_WARN("store",
                "refused store connection from {}: no job token presented (first "
                "request was '{}')",
                peer_, proto::opName(r.op));
    return error(r.op,
                 fmt::format("job token rejected by the store (no job token presented: the "
                             "first request was '{}', not hello)",
                             proto::opName(r.op)),
                 true);
  }
  try {
    return proto::encodeResponse(r.op, dispatch(r));
  } catch (const Error& e) {  // add() on a non-integer value, a get racing a delete, shutdown
    return error(r.op, e.what(), false);
  }
}

Response StoreSession::dispatch(const Request& r) {
  Response out;
  auto waitFor = [&](const std::vector<std::string>& keys) {
    auto t = std::chrono::milliseconds(
        static_cast<int64_t>(std::min<uint64_t>(r.timeoutMs, maxWait_.count())));
    auto start = std::chrono::steady_clock::now();
    out.missing = data_.waitMissing(keys, t);
    if (!out.missing.empty()) {
      out.status = Status::kTimeout;
      out.waitedMs = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                               std::chrono::steady_clock::now() - start)
                                               .count());
    }
    return out.missing.empty();
  };
  switch (r.op) {
    case Op::kSet: data_.set(r.keys[0], r.value); break;
    case Op::kGet:
      if (waitFor(r.keys)) out.value = data_.get(r.keys[0], std::chrono::milliseconds(0));
      break;
    case Op::kAdd: out.number = data_.add(r.keys[0], r.delta); break;
    case Op::kCompareSet: out.value = data_.compareSet(r.keys[0], r.value, r.desired); break;
    case Op::kWait: waitFor(r.keys); break;
    case Op::kDelete: out.number = data_.deleteKey(r.keys[0]) ? 1 : 0; break;
    case Op::kNumKeys: out.number = data_.numKeys(); break;
    case Op::kCheck: out.number = data_.check(r.keys) ? 1 : 0; break;
    case Op::kHello: break;
  }
  return out;
}

}  // namespace ds::comm
