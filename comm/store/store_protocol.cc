// Encoding and bounds-checked decoding of TcpStore frames. A Reader tracks its position and
// throws ProtocolError on any read past the end; every length is checked against its limit
// before anything is allocated.
#include "comm/store/store_protocol.h"

#include <fmt/format.h>

#include <cstring>

namespace ds::comm::proto {

namespace {

class Writer {
 public:
  void u8(uint8_t v) { out_.push_back(v); }
  void u32(uint32_t v) { raw(&v, 4); }
  void u64(uint64_t v) { raw(&v, 8); }
  void bytes(const void* p, size_t n) {
    u32(static_cast<uint32_t>(n));
    raw(p, n);
  }
  void str(const std::string& s) { bytes(s.data(), s.size()); }
  void bytes(const Bytes& b) { bytes(b.data(), b.size()); }
  Bytes take() { return std::move(out_); }

 private:
  // The protocol is little-endian; so are the hosts we build for (x86-64, aarch64).
  void raw(const void* p, size_t n) {
    auto c = static_cast<const uint8_t*>(p);
    out_.insert(out_.end(), c, c + n);
  }
  Bytes out_;
};

class Reader {
 public:
  Reader(const uint8_t* p, size_t n, const char* what) : p_(p), n_(n), what_(what) {}
  uint8_t u8() { return *need(1, "u8"); }
  uint32_t u32() {
    uint32_t v;
    std::memcpy(&v, need(4, "u32"), 4);
    return v;
  }
  uint64_t u64() {
    uint64_t v;
    std::memcpy(&v, need(8, "u64"), 8);
    return v;
  }
  Bytes bytes(uint32_t limit, const char* field) {
    uint32_t len = u32();
    if (len > limit)
      throw ProtocolError(fmt::format("{}: {} of {} bytes exceeds the limit of {} bytes", what_,
                                      field, len, limit));
    const uint8_t* p = need(len, field);
    return Bytes(p, p + len);
  }
  std::string str(uint32_t limit, const char* field) {
    Bytes b = bytes(limit, field);
    return std::string(b.begin(), b.end());
  }
  void end() const {
    if (pos_ != n_)
      throw ProtocolError(
          fmt::format("{}: {} unexpected trailing bytes at offset {}", what_, n_ - pos_, pos_));
  }

 private:
  const uint8_t* need(size_t k, const char* field) {
    if (n_ - pos_ < k)
      throw ProtocolError(fmt::format("{}: truncated {} at offset {} (needs {} bytes, {} left)",
                                      what_, field, pos_, k, n_ - pos_));
    const uint8_t* p = p_ + pos_;
    pos_ += k;
    return p;
  }
  const uint8_t* p_;
  size_t n_;
  size_t pos_ = 0;
  const char* what_;
};

std::vector<std::string> readKeys(Reader& r) {
  uint32_t n = r.u32();
  if (n > kMaxKeys)
    throw ProtocolError(fmt::format("store request: {} keys exceeds the limit of {}", n, kMaxKeys));
  std::vector<std::string> keys;
  keys.reserve(std::min<uint32_t>(n, 1024));
  for (uint32_t i = 0; i < n; ++i) keys.push_back(r.str(kMaxKey, "key"));
  return keys;
}

void writeKeys(Writer& w, const std::vector<std::string>& keys) {
  w.u32(static_cast<uint32_t>(keys.size()));
  for (const auto& k : keys) w.str(k);
}

}  // namespace

const char* opName(Op op) {
  switch (op) {
    case Op::kHello: return "hello";
    case Op::kSet: return "set";
    case Op::kGet: return "get";
    case Op::kAdd: return "add";
    case Op::kCompareSet: return "compareSet";
    case Op::kWait: return "wait";
    case Op::kDelete: return "delete";
    case Op::kNumKeys: return "numKeys";
    case Op::kCheck: return "check";
  }
  return "unknown";
}

Request parseRequest(const uint8_t* body, size_t size) {
  Reader rd(body, size, "store request");
  Request r;
  uint8_t op = rd.u8();
  if (op < static_cast<uint8_t>(Op::kHello) || op > static_cast<uint8_t>(Op::kCheck))
    throw ProtocolError(fmt::format("store request: unknown op code {}", op));
  r.op = static_cast<Op>(op);
  switch (r.op) {
    case Op::kHello:
      r.magic = rd.u32();
      r.version = rd.u32();
      r.token = rd.str(kMaxKey, "token");
      break;
    case Op::kSet:
      r.keys.push_back(rd.str(kMaxKey, "key"));
      r.value = rd.bytes(kMaxFrame, "value");
      break;
    case Op::kGet:
      r.keys.push_back(rd.str(kMaxKey, "key"));
      r.timeoutMs = rd.u64();
      break;
    case Op::kAdd:
      r.keys.push_back(rd.str(kMaxKey, "key"));
      r.delta = static_cast<int64_t>(rd.u64());
      break;
    case Op::kCompareSet:
      r.keys.push_back(rd.str(kMaxKey, "key"));
      r.value = rd.bytes(kMaxFrame, "expected value");
      r.desired = rd.bytes(kMaxFrame, "desired value");
      break;
    case Op::kWait:
      r.keys = readKeys(rd);
      r.timeoutMs = rd.u64();
      break;
    case Op::kDelete: r.keys.push_back(rd.str(kMaxKey, "key")); break;
    case Op::kNumKeys: break;
    case Op::kCheck: r.keys = readKeys(rd); break;
  }
  rd.end();
  return r;
}

Bytes encodeRequest(const Request& r) {
  Writer w;
  w.u8(static_cast<uint8_t>(r.op));
  auto key = [&] { w.str(r.keys.at(0)); };
  switch (r.op) {
    case Op::kHello:
      w.u32(r.magic);
      w.u32(r.version);
      w.str(r.token);
      break;
    case Op::kSet:
      key();
      w.bytes(r.value);
      break;
    case Op::kGet:
      key();
      w.u64(r.timeoutMs);
      break;
    case Op::kAdd:
      key();
      w.u64(static_cast<uint64_t>(r.delta));
      break;
    case Op::kCompareSet:
      key();
      w.bytes(r.value);
      w.bytes(r.desired);
      break;
    case Op::kWait:
      writeKeys(w, r.keys);
      w.u64(r.timeoutMs);
      break;
    case Op::kDelete: key(); break;
    case Op::kNumKeys: break;
    case Op::kCheck: writeKeys(w, r.keys); break;
  }
  return w.take();
}

Bytes encodeResponse(Op op, const Response& r) {
  Writer w;
  w.u8(static_cast<uint8_t>(r.status));
  if (r.status == Status::kError) {
    w.str(r.message);
  } else if (r.status == Status::kTimeout) {
    writeKeys(w, r.missing);
    w.u64(r.waitedMs);
  } else {
    switch (op) {
      case Op::kGet:
      case Op::kCompareSet: w.bytes(r.value); break;
      case Op::kAdd:
      case Op::kNumKeys: w.u64(static_cast<uint64_t>(r.number)); break;
      case Op::kDelete:
      case Op::kCheck: w.u8(r.number ? 1 : 0); break;
      default: break;
    }
  }
  return w.take();
}

Response parseResponse(Op op, const uint8_t* body, size_t size) {
  Reader rd(body, size, "store response");
  Response r;
  uint8_t st = rd.u8();
  if (st > static_cast<uint8_t>(Status::kTimeout))
    throw ProtocolError(fmt::format("store response: unknown status {}", st));
  r.status = static_cast<Status>(st);
  if (r.status == Status::kError) {
    r.message = rd.str(kMaxFrame, "error message");
  } else if (r.status == Status::kTimeout) {
    r.missing = readKeys(rd);
    r.waitedMs = rd.u64();
  } else {
    switch (op) {
      case Op::kGet:
      case Op::kCompareSet: r.value = rd.bytes(kMaxFrame, "value"); break;
      case Op::kAdd:
      case Op::kNumKeys: r.number = static_cast<int64_t>(rd.u64()); break;
      case Op::kDelete:
      case Op::kCheck: r.number = rd.u8(); break;
      default: break;
    }
  }
  rd.end();
  return r;
}

Bytes frame(const Bytes& body) {
  DS_CHECK(body.size() <= kMaxFrame, "store frame of {} bytes exceeds {}", body.size(), kMaxFrame);
  Bytes out(kHeaderBytes + body.size());
  uint32_t n = static_cast<uint32_t>(body.size());
  std::memcpy(out.data(), &n, 4);
  if (!body.empty()) std::memcpy(out.data() + kHeaderBytes, body.data(), body.size());
  return out;
}

uint32_t frameLength(const uint8_t header[kHeaderBytes]) {
  uint32_t n;
  std::memcpy(&n, header, 4);
  if (n > kMaxFrame)
    throw ProtocolError(
        fmt::format("store frame of {} bytes exceeds the limit of {} bytes", n, kMaxFrame));
  return n;
}

}  // namespace ds::comm::proto
