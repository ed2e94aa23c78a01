// TcpStore client: connect + hello, then framed request/response calls under a mutex. The server
// enforces get/wait timeouts; the client's own deadline is that timeout plus a margin, so a dead
// server is still noticed.
#include "comm/store/tcp_store.h"

#include <fmt/format.h>

#include <algorithm>

#include "comm/store/store_util.h"
#include "core/env.h"
#include "core/error.h"
#include "core/log.h"

namespace ds::comm {

using proto::Op;
using proto::Request;
using proto::Response;
using proto::Status;

namespace {
constexpr std::chrono::milliseconds kReplyMargin{5000};

constexpr std::chrono::milliseconds kForever = std::chrono::hours(24 * 365);

// Clamps a caller's timeout to [0, a year], so deadlines never overflow.
std::chrono::milliseconds clampTimeout(std::chrono::milliseconds t) {
  return std::clamp<std::chrono::milliseconds>(t, std::chrono::milliseconds(0), kForever);
}
uint64_t ms(std::chrono::milliseconds t) { return uint64_t(clampTimeout(t).count()); }
}  // namespace

TcpStore::TcpStore(TcpStoreOptions options)
    : options_(std::move(options)),
      timeout_(options_.timeout.count() > 0 ? options_.timeout : ds::defaultTimeout()) {
  port_ = options_.port;
  if (options_.isServer) {
    TcpStoreServerOptions so;
    so.host = options_.bindHost.empty() ? options_.host : options_.bindHost;
    so.port = options_.port;
    so.token = options_.token;
    server_ = std::make_unique<TcpStoreServer>(so);
    port_ = server_->port();
  }
  auto deadline = Clock::now() + timeout_;
  fd_ = connectTcp(options_.host, port_, deadline);
  Request hello;
  hello.op = Op::kHello;
  hello.magic = proto::kMagic;
  hello.version = proto::kVersion;
  hello.token = options_.token;
  Response r = call(hello, std::chrono::milliseconds(0));
  if (r.status != Status::kOk) {
    fd_.reset();
    throw CommError(fmt::format("store at {} refused this rank: {}", address(), r.message));
  }
}

TcpStore::~TcpStore() {
  fd_.reset();
  if (!server_) return;
  if (!server_->waitIdle(options_.serverLinger))
    DS_LOG_WARN("store",
                "stopping the store at {} with {} client(s) still connected after "
                "waiting {} ms for them to finish",
                address(), server_->openConnections(), options_.serverLinger.count());
  server_->stop();
}

std::string TcpStore::address() const { return fmt::format("{}:{}", options_.host, port_); }

Response TcpStore::call(const Request& r, std::chrono::milliseconds extra) {
  std::lock_guard<std::mutex> g(mu_);
  if (!broken_.empty())
    throw CommError(
        fmt::format("store {} to {}: the connection is unusable since an earlier "
                    "failure ({})",
                    proto::opName(r.op), address(), broken_));
  std::string peer = "the store at " + address();
  auto budget = std::min<std::chrono::milliseconds>(clampTimeout(timeout_) + extra, 2 * kForever);
  auto deadline = Clock::now() + budget;
  Response resp;
  try {
    Bytes out = proto::frame(proto::encodeRequest(r));
    sendAll(fd_.get(), out.data(), out.size(), deadline, peer, proto::opName(r.op));
    uint8_t header[proto::kHeaderBytes];
    recvAll(fd_.get(), header, sizeof header, deadline, peer, "a store reply");
    uint32_t n = proto::frameLength(header);
    Bytes body(n);
    recvAll(fd_.get(), body.data(), n, deadline, peer, "a store reply");
    resp = proto::parseResponse(r.op, body.data(), body.size());
  } catch (const Error& e) {
    // Timeout, lost peer or garbled reply: the stream is out of step; never reuse it.
    broken_ = e.what();
    fd_.reset();
    throw;
  }
  if (resp.status == Status::kError && r.op != Op::kHello)
    throw CommError(
        fmt::format("store {} on {} failed: {}", proto::opName(r.op), address(), resp.message));
  return resp;
}

void TcpStore::checkTimeout(const Request& r, const Response& resp, const char* what) {
  if (resp.status != Status::kTimeout) return;
  (void)r;
  throw TimeoutError(timeoutMessage(what, resp.missing, "the store at " + address(),
                                    std::chrono::milliseconds(resp.waitedMs)));
}

void TcpStore::set(const std::string& key, const Bytes& value) {
  Request r;
  r.op = Op::kSet;
  r.keys = {key};
  r.value = value;
  call(r, std::chrono::milliseconds(0));
}

Bytes TcpStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  Request r;
  r.op = Op::kGet;
  r.keys = {key};
  r.timeoutMs = ms(timeout);
  Response resp = call(r, clampTimeout(timeout) + kReplyMargin);
  checkTimeout(r, resp, "get");
  return std::move(resp.value);
}

int64_t TcpStore::add(const std::string& key, int64_t delta) {
  Request r;
  r.op = Op::kAdd;
  r.keys = {key};
  r.delta = delta;
  return call(r, std::chrono::milliseconds(0)).number;
}

Bytes TcpStore::compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) {
  Request r;
  r.op = Op::kCompareSet;
  r.keys = {key};
  r.value = expected;
  r.desired = desired;
  return std::move(call(r, std::chrono::milliseconds(0)).value);
}

void TcpStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  Request r;
  r.op = Op::kWait;
  r.keys = keys;
  r.timeoutMs = ms(timeout);
  checkTimeout(r, call(r, clampTimeout(timeout) + kReplyMargin), "wait");
}

bool TcpStore::deleteKey(const std::string& key) {
  Request r;
  r.op = Op::kDelete;
  r.keys = {key};
  return call(r, std::chrono::milliseconds(0)).number != 0;
}

int64_t TcpStore::numKeys() {
  Request r;
  r.op = Op::kNumKeys;
  return call(r, std::chrono::milliseconds(0)).number;
}

bool TcpStore::check(const std::vector<std::string>& keys) {
  Request r;
  r.op = Op::kCheck;
  r.keys = keys;
  return call(r, std::chrono::milliseconds(0)).number != 0;
}

}  // namespace ds::comm
