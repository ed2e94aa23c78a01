// HttpServer on loopback with a trivial handler: an answer sent from another thread arrives and
// closes the connection; a handler that throws is a 500; a request that does not arrive whole in
// time is 408; connections beyond the limit are 503; a refused request never reaches the handler.
// Every read is bounded.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "runtime/serve/http_response.h"
#include "runtime/serve/http_server.h"

using namespace ds::runtime::serve;

namespace {

struct Echo : HttpHandler {
  HttpServer* server = nullptr;
  std::atomic<int> requests{0};
  std::vector<std::thread> answerers;  // I/O thread only; joined by the test
  void onRequest(uint64_t conn, const HttpRequest& req, const std::string&) override {
    ++requests;
    if (req.target == "/throw") throw std::runtime_error("handler bug");
    answerers.emplace_back([this, conn, body = req.body] {  // answered from another thread
      server->send(conn, httpResponse(200, "text/plain", "got " + body), true);
    });
  }
  void onDisconnect(uint64_t, const std::string&) override {}
};

// A loopback connection to port with a 30 s receive timeout (CLOEXEC: no child inherits it).
int connectTo(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  timeval tv{30, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

// Everything the server sends until it closes (or 30 s pass without a byte).
std::string readAll(int fd) {
  std::string got;
  char buf[4096];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) got.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return got;
}

void sendAll(int fd, const std::string& s) {
  REQUIRE(::send(fd, s.data(), s.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(s.size()));
}

// The server sees a client's close on its own thread: waits (bounded) until it has seen them all,
// so the connection limit counts only the connections that follow.
void waitIdle(const HttpServer& server) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (server.connectionCount() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  REQUIRE(server.connectionCount() == 0);
}

}  // namespace

TEST_CASE("http server: answers, 408 for a slow request, 503 beyond the connections", "[unit]") {
  Echo echo;
  HttpServerOptions o;
  o.readTimeout = std::chrono::milliseconds(300);
  o.maxConnections = 2;
  HttpServer server(o, echo);
  echo.server = &server;
  server.serve();
  const int port = server.port();
  REQUIRE(port > 0);

  int fd = connectTo(port);
  sendAll(fd, "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello");
  const std::string ok = readAll(fd);
  CHECK(ok.rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
  CHECK(ok.find("Connection: close\r\n") != std::string::npos);
  CHECK(ok.size() >= 9);
  CHECK(ok.substr(ok.size() - 9) == "got hello");

  fd = connectTo(port);  // headers, then silence
  sendAll(fd, "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhel");
  const std::string slow = readAll(fd);
  CHECK(slow.rfind("HTTP/1.1 408 Request Timeout\r\n", 0) == 0);
  CHECK(slow.find("the request did not arrive whole within 300 ms") != std::string::npos);

  const int a = connectTo(port), b = connectTo(port);
  const int c = connectTo(port);  // the third: over the limit of 2
  const std::string refused = readAll(c);
  CHECK(refused.rfind("HTTP/1.1 503 Service Unavailable\r\n", 0) == 0);
  CHECK(refused.find("maximum of 2 open connections") != std::string::npos);
  ::close(a);
  ::close(b);
  waitIdle(server);

  fd = connectTo(port);
  sendAll(fd, "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 99999999\r\n\r\n");
  CHECK(readAll(fd).rfind("HTTP/1.1 413 Content Too Large\r\n", 0) == 0);
  CHECK(echo.requests == 1);

  waitIdle(server);
  fd = connectTo(port);  // a handler that throws: 500, and the server goes on
  sendAll(fd, "GET /throw HTTP/1.1\r\nHost: h\r\n\r\n");
  const std::string failed = readAll(fd);
  CHECK(failed.rfind("HTTP/1.1 500 Internal Server Error\r\n", 0) == 0);
  CHECK(failed.find("internal error: handler bug") != std::string::npos);
  waitIdle(server);
  fd = connectTo(port);
  sendAll(fd, "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nok");
  CHECK(readAll(fd).find("got ok") != std::string::npos);
  server.stop();
  for (auto& t : echo.answerers) t.join();
}
