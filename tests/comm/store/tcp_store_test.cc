// Tests of TcpStore and its server over real sockets on 127.0.0.1: every operation, blocking
// waits, timeouts and their messages, token refusal, a port in use, connect retry, and the
// server surviving malformed, oversized and truncated frames and vanishing clients (raw sockets).
#include "comm/store/tcp_store.h"

#include <catch2/catch.hpp>

#include <sys/socket.h>

#include <cstring>
#include <optional>
#include <thread>

#include "comm/store/prefix_store.h"
#include "comm/store/store_protocol.h"
#include "core/error.h"
#include "tests/support/spawn_ranks.h"

using namespace ds::comm;
using namespace std::chrono_literals;

namespace {

const std::string kToken = "test-token-123";

TcpStoreOptions serverOpts(int port = 0) {
  TcpStoreOptions o;
  o.host = "127.0.0.1";
  o.port = port;
  o.isServer = true;
  o.token = kToken;
  o.timeout = 10s;
  return o;
}

TcpStoreOptions clientOpts(int port, const std::string& token = kToken) {
  TcpStoreOptions o;
  o.host = "127.0.0.1";
  o.port = port;
  o.token = token;
  o.timeout = 10s;
  return o;
}

Bytes b(const std::string& s) { return Bytes(s.begin(), s.end()); }

// A raw connection for speaking (and misspeaking) the protocol by hand.
struct Raw {
  Fd fd;
  explicit Raw(int port) : fd(connectTcp("127.0.0.1", port, Clock::now() + 5s)) {}
  void send(const Bytes& bytes) {
    sendAll(fd.get(), bytes.data(), bytes.size(), Clock::now() + 5s, "server", "test bytes");
  }
  void sendFrame(const proto::Request& r) { send(proto::frame(proto::encodeRequest(r))); }
  void hello(const std::string& token = kToken) {
    proto::Request r;
    r.op = proto::Op::kHello;
    r.magic = proto::kMagic;
    r.version = proto::kVersion;
    r.token = token;
    sendFrame(r);
  }
  // Reads one reply; nullopt when the server closed the connection instead.
  std::optional<proto::Response> reply(proto::Op op) {
    uint8_t h[4];
    if (!recvAll(fd.get(), h, 4, Clock::now() + 5s, "server", "reply", true)) return {};
    uint32_t n;
    std::memcpy(&n, h, 4);
    Bytes body(n);
    recvAll(fd.get(), body.data(), n, Clock::now() + 5s, "server", "reply");
    return proto::parseResponse(op, body.data(), n);
  }
  // True when the server closed this connection (EOF within the time limit).
  bool closedByServer() {
    uint8_t c;
    try {
      return !recvAll(fd.get(), &c, 1, Clock::now() + 5s, "server", "eof", true);
    } catch (const ds::CommError&) {
      return true;  // reset
    }
  }
};

void checkServerStillServes(int port) {
  TcpStore c(clientOpts(port));
  c.setString("alive", "yes");
  CHECK(c.getString("alive", 1s) == "yes");
}

}  // namespace

TEST_CASE("TcpStore: every operation against a real server", "[unit]") {
  TcpStore server(serverOpts());
  REQUIRE(server.port() > 0);
  TcpStore c(clientOpts(server.port()));
  c.set("a", b("1"));
  CHECK(server.get("a", 1s) == b("1"));
  CHECK(c.get("a", 1s) == b("1"));
  c.set("empty", b(""));
  CHECK(c.get("empty", 1s).empty());
  CHECK(c.add("n", 5) == 5);
  CHECK(server.add("n", -2) == 3);
  CHECK(c.getString("n", 1s) == "3");
  CHECK(c.compareSet("cs", b(""), b("x")) == b("x"));
  CHECK(c.compareSet("cs", b("no"), b("y")) == b("x"));
  CHECK(c.compareSet("cs", b("x"), b("y")) == b("y"));
  CHECK(c.check({"a", "n", "cs"}));
  CHECK_FALSE(c.check({"a", "zz"}));
  CHECK(c.numKeys() == 4);
  CHECK(c.deleteKey("a"));
  CHECK_FALSE(c.deleteKey("a"));
  CHECK(c.numKeys() == 3);
  Bytes big(1 << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = uint8_t(i * 7);
  c.set("big", big);
  CHECK(server.get("big", 1s) == big);
  c.setString("text", "v");
  try {
    c.add("text", 1);
    FAIL("expected CommError");
  } catch (const ds::CommError& e) {
    CHECK_THAT(e.what(), Catch::Contains("'text'") && Catch::Contains("not an integer"));
  }
  CHECK(c.getString("text", 1s) == "v");  // a server-side error leaves the connection usable
  PrefixStore p("g1", std::make_shared<TcpStore>(clientOpts(server.port())));
  p.setString("k", "pv");
  CHECK(c.getString("g1/k", 1s) == "pv");
}

TEST_CASE("TcpStore: get and wait block on the server until another client sets", "[unit]") {
  TcpStore server(serverOpts());
  std::thread setter([&] {
    TcpStore c(clientOpts(server.port()));
    std::this_thread::sleep_for(100ms);
    c.setString("k1", "v1");
    std::this_thread::sleep_for(50ms);
    c.setString("k2", "v2");
  });
  TcpStore waiter(clientOpts(server.port()));
  waiter.wait({"k1", "k2"}, 10s);
  CHECK(waiter.getString("k2", 1s) == "v2");
  setter.join();
}

TEST_CASE("TcpStore: timeouts name the missing keys, the server and the time waited", "[unit]") {
  TcpStore server(serverOpts());
  TcpStore c(clientOpts(server.port()));
  c.setString("present", "1");
  std::string addr = "127.0.0.1:" + std::to_string(server.port());
  try {
    c.get("absent", 100ms);
    FAIL("expected TimeoutError");
  } catch (const ds::TimeoutError& e) {
    CHECK_THAT(e.what(), Catch::Contains("absent") && Catch::Contains(addr) &&
                             Catch::Contains("timed out after 0.1"));
  }
  try {
    c.wait({"present", "m1", "m2"}, 100ms);
    FAIL("expected TimeoutError");
  } catch (const ds::TimeoutError& e) {
    CHECK_THAT(e.what(), Catch::Contains("m1, m2") && !Catch::Contains("present"));
  }
  CHECK(c.getString("present", 1s) == "1");  // a server-enforced timeout keeps the connection
}

TEST_CASE("TcpStore: a wrong or missing token is refused with a clear error", "[unit]") {
  TcpStore server(serverOpts());
  for (std::string bad : {std::string("wrong"), std::string("")}) {
    try {
      TcpStore c(clientOpts(server.port(), bad));
      FAIL("expected CommError");
    } catch (const ds::CommError& e) {
      CHECK_THAT(e.what(), Catch::Contains("token rejected") &&
                               Catch::Contains(std::to_string(server.port())));
      CHECK_THAT(e.what(), Catch::Contains(bad.empty() ? "no job token" : "wrong job token"));
    }
  }
  // A request before hello is refused the same way.
  Raw raw(server.port());
  proto::Request r;
  r.op = proto::Op::kSet;
  r.keys = {"sneaky"};
  raw.sendFrame(r);
  auto resp = raw.reply(proto::Op::kSet);
  REQUIRE(resp);
  CHECK(resp->status == proto::Status::kError);
  CHECK_THAT(resp->message, Catch::Contains("token rejected"));
  CHECK(raw.closedByServer());
  CHECK_FALSE(server.check({"sneaky"}));
  CHECK(server.server()->refusedConnections() >= 3);
}

TEST_CASE("TcpStore: a master port already in use is an error naming the address", "[unit]") {
  TcpStore first(serverOpts());
  try {
    TcpStore second(serverOpts(first.port()));
    FAIL("expected CommError");
  } catch (const ds::CommError& e) {
    CHECK_THAT(e.what(), Catch::Contains("127.0.0.1:" + std::to_string(first.port())) &&
                             Catch::Contains("already in use"));
  }
}

TEST_CASE("TcpStore: clients retry until the server comes up, then time out", "[unit]") {
  int port = ds::test::freePort();
  std::unique_ptr<TcpStore> server;
  std::thread late([&] {
    std::this_thread::sleep_for(300ms);
    server = std::make_unique<TcpStore>(serverOpts(port));
  });
  TcpStore c(clientOpts(port));
  late.join();
  c.setString("x", "1");
  CHECK(server->getString("x", 1s) == "1");

  int dead = ds::test::freePort();
  auto o = clientOpts(dead);
  o.timeout = 300ms;
  try {
    TcpStore never(o);
    FAIL("expected TimeoutError");
  } catch (const ds::TimeoutError& e) {
    CHECK_THAT(e.what(), Catch::Contains("127.0.0.1:" + std::to_string(dead)) &&
                             Catch::Contains("could not connect"));
  }
}

TEST_CASE("TcpStore server survives malformed, oversized and truncated frames", "[unit]") {
  TcpStore server(serverOpts());
  const int port = server.port();
  SECTION("garbage instead of a hello") {
    Raw raw(port);
    raw.send(proto::frame(b("\x07garbage!")));
    auto r = raw.reply(proto::Op::kHello);
    REQUIRE(r);
    CHECK(r->status == proto::Status::kError);
    CHECK(raw.closedByServer());
  }
  SECTION("unknown op after hello") {
    Raw raw(port);
    raw.hello();
    REQUIRE(raw.reply(proto::Op::kHello)->status == proto::Status::kOk);
    raw.send(proto::frame(Bytes{0xEE, 1, 2, 3}));
    auto r = raw.reply(proto::Op::kHello);
    REQUIRE(r);
    CHECK_THAT(r->message, Catch::Contains("unknown op code 238"));
  }
  SECTION("field lengths pointing past the frame") {
    Raw raw(port);
    raw.hello();
    raw.reply(proto::Op::kHello);
    Bytes body{uint8_t(proto::Op::kSet), 0x00, 0x01, 0x00, 0x00, 'k'};  // key of 256 bytes
    raw.send(proto::frame(body));
    auto r = raw.reply(proto::Op::kSet);
    REQUIRE(r);
    CHECK_THAT(r->message, Catch::Contains("truncated"));
  }
  SECTION("oversized frame header before and after hello") {
    Raw pre(port);
    pre.send(Bytes{0xFF, 0xFF, 0xFF, 0xFF});
    auto r = pre.reply(proto::Op::kHello);
    REQUIRE(r);
    CHECK_THAT(r->message, Catch::Contains("exceeds the limit"));
    CHECK(pre.closedByServer());
    Raw post(port);
    post.hello();
    post.reply(proto::Op::kHello);
    post.send(Bytes{0xFF, 0xFF, 0xFF, 0x7F});
    auto r2 = post.reply(proto::Op::kHello);
    REQUIRE(r2);
    CHECK_THAT(r2->message, Catch::Contains("exceeds the limit"));
  }
  SECTION("a large first frame before the token is refused") {
    Raw raw(port);
    raw.send(proto::frame(Bytes(100000, 1)));
    auto r = raw.reply(proto::Op::kHello);
    REQUIRE(r);
    CHECK_THAT(r->message, Catch::Contains("before the job token"));
  }
  SECTION("clients vanishing mid-header and mid-body") {
    {
      Raw raw(port);
      raw.send(Bytes{10, 0});
    }
    {
      Raw raw(port);
      raw.hello();
      raw.reply(proto::Op::kHello);
      Bytes f = proto::frame(Bytes(1000, 2));
      f.resize(500);
      raw.send(f);
    }
    {  // vanishing while the server waits on its behalf
      Raw raw(port);
      raw.hello();
      raw.reply(proto::Op::kHello);
      proto::Request w;
      w.op = proto::Op::kWait;
      w.keys = {"never"};
      w.timeoutMs = 200;
      raw.sendFrame(w);
    }
  }
  checkServerStillServes(port);
}

TEST_CASE("TcpStore: stopping the server fails a blocked client instead of hanging", "[unit]") {
  auto o = serverOpts();
  o.serverLinger = 0ms;  // stop at once although this client is still connected
  auto server = std::make_unique<TcpStore>(o);
  TcpStore c(clientOpts(server->port()));
  std::thread stopper([&] {
    std::this_thread::sleep_for(100ms);
    server.reset();
  });
  auto start = std::chrono::steady_clock::now();
  try {
    c.get("never", 30s);
    FAIL("expected CommError");
  } catch (const ds::CommError& e) {
    // Either the "shutting down" reply or the closed connection, whichever wins the race.
    CHECK_THAT(e.what(),
               Catch::Contains("shutting down") || Catch::Contains("closed the connection"));
  }
  CHECK(std::chrono::steady_clock::now() - start < 20s);
  stopper.join();
  CHECK_THROWS_AS(c.setString("x", "1"), ds::CommError);  // the server is gone
}

TEST_CASE("TcpStore: thread ranks rendezvous through rank 0's server", "[multirank]") {
  const int n = 8;
  int port = ds::test::freePort();
  std::vector<int64_t> order(n);
  std::vector<std::string> values(n);
  ds::test::runRanks(
      n,
      [&](int r) {
        auto o = r == 0 ? serverOpts(port) : clientOpts(port);
        TcpStore s(o);
        s.setString("rank/" + std::to_string(r), "hello from " + std::to_string(r));
        order[r] = s.add("arrived", 1);
        std::vector<std::string> keys;
        for (int i = 0; i < n; ++i) keys.push_back("rank/" + std::to_string(i));
        s.wait(keys, 20s);
        values[r] = s.getString("rank/" + std::to_string((r + 1) % n), 1s);
        if (s.add("finished", 1) == n) s.setString("all-done", "1");
        if (r == 0) s.wait({"all-done"}, 20s);  // keep the server up until everyone finished
      },
      60s);
  std::sort(order.begin(), order.end());
  for (int i = 0; i < n; ++i) {
    CHECK(order[i] == i + 1);
    CHECK(values[i] == "hello from " + std::to_string((i + 1) % n));
  }
}
