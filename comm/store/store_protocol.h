// The TcpStore wire protocol (docs/store_protocol.md): length-prefixed little-endian frames,
// one request -> one response. Pure encode/decode, no sockets: the fuzz harness drives
// parseRequest() directly. Invariant: a parser never reads past the frame it is given and
// reports every malformed input as ProtocolError (a CommError), never UB or a crash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "comm/store/store.h"
#include "core/error.h"

namespace ds::comm::proto {

constexpr uint32_t kMagic = 0x54535344;  // "DSST" little-endian
constexpr uint32_t kVersion = 1;
constexpr uint32_t kMaxFrame = 64u << 20;  // 64 MiB: largest frame body accepted
constexpr uint32_t kMaxKey = 4096;         // bytes per key
constexpr uint32_t kMaxKeys = 65536;       // keys per wait/check
constexpr size_t kHeaderBytes = 4;         // u32 body length

enum class Op : uint8_t {
  kHello = 1,
  kSet = 2,
  kGet = 3,
  kAdd = 4,
  kCompareSet = 5,
  kWait = 6,
  kDelete = 7,
  kNumKeys = 8,
  kCheck = 9,
};
const char* opName(Op op);

enum class Status : uint8_t { kOk = 0, kError = 1, kTimeout = 2 };

class ProtocolError : public CommError {
 public:
  using CommError::CommError;
  const char* kind() const noexcept override { return "ProtocolError"; }
};

struct Request {
  Op op = Op::kNumKeys;
  std::vector<std::string> keys;    // one for set/get/add/compareSet/delete; n for wait/check
  Bytes value;                      // set: value; compareSet: expected
  Bytes desired;                    // compareSet
  int64_t delta = 0;                // add
  uint64_t timeoutMs = 0;           // get/wait
  uint32_t magic = 0, version = 0;  // hello
  std::string token;                // hello
};

struct Response {
  Status status = Status::kOk;
  Bytes value;                       // get/compareSet
  int64_t number = 0;                // add/numKeys; delete/check: 0 or 1
  std::string message;               // error
  std::vector<std::string> missing;  // timeout
  uint64_t waitedMs = 0;             // timeout
};

// Frame body <-> Request. parseRequest throws ProtocolError naming what was wrong and where.
Request parseRequest(const uint8_t* body, size_t size);
Bytes encodeRequest(const Request& r);  // body only, no length header

// Response bodies. The op tells which OK payload to expect.
Bytes encodeResponse(Op op, const Response& r);
Response parseResponse(Op op, const uint8_t* body, size_t size);

// Prepends the u32 length header.
Bytes frame(const Bytes& body);
// Reads the length header (4 bytes); throws ProtocolError when it exceeds kMaxFrame.
uint32_t frameLength(const uint8_t header[kHeaderBytes]);

}  // namespace ds::comm::proto
