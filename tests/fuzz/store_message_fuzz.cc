// fuzz-sources: comm/store/*.cc
// fuzz-deps: ds_comm_store
// Fuzz harness for the TcpStore server's message handling: the input is byte 0 (mode bits) then
// a byte stream cut into frames exactly as the server's reader does, each fed to a StoreSession
// (the server's per-connection logic) over a fresh HashStore; also the request and reply
// parsers directly. Invariants checked: nothing crashes, and every request that parses
// re-encodes to the same bytes. Blocking get/wait are capped at 0 ms here.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "comm/store/hash_store.h"
#include "comm/store/store_protocol.h"
#include "comm/store/store_session.h"
#include "core/log.h"

using namespace ds::comm;

namespace {

void roundTrip(const uint8_t* body, size_t n) {
  proto::Request r;
  try {
    r = proto::parseRequest(body, n);
  } catch (const proto::ProtocolError&) {
    return;
  }
  Bytes again = proto::encodeRequest(r);
  if (again.size() != n || (n && std::memcmp(again.data(), body, n) != 0)) std::abort();
}

void replyParsers(const uint8_t* body, size_t n) {
  for (uint8_t op = 1; op <= 9; ++op) {
    try {
      proto::parseResponse(static_cast<proto::Op>(op), body, n);
    } catch (const proto::ProtocolError&) {
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static bool quiet = [] {
    ds::log::setThreshold(ds::log::Level::kError);  // refusals log warnings; keep runs fast
    return true;
  }();
  (void)quiet;
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  ++data;
  --size;
  roundTrip(data, size);
  replyParsers(data, size);

  HashStore store;
  StoreSession session(store, "fuzz-token", "fuzzer", std::chrono::milliseconds(0));
  if (mode & 1) {  // start past the handshake, so the fuzzer reaches every op quickly
    proto::Request hello;
    hello.op = proto::Op::kHello;
    hello.magic = proto::kMagic;
    hello.version = proto::kVersion;
    hello.token = "fuzz-token";
    Bytes h = proto::encodeRequest(hello);
    session.onFrame(h.data(), h.size());
    if (!session.authenticated()) std::abort();
  }
  size_t pos = 0;
  while (size - pos >= proto::kHeaderBytes && !session.closing()) {
    uint32_t n;
    try {
      n = proto::frameLength(data + pos);
    } catch (const proto::ProtocolError& e) {
      session.refuseFrame(e.what());
      break;
    }
    pos += proto::kHeaderBytes;
    if (n > size - pos) break;  // truncated: the server would wait for more, then see EOF
    Bytes reply = session.onFrame(data + pos, n);
    if (reply.empty()) std::abort();  // every frame gets a reply
    pos += n;
  }
  return 0;
}
