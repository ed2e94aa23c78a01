// HttpServer: the listening socket and every client connection of `dsrt serve`, served by one
// poll(2) thread. It reads one request per connection (HttpRequestParser), hands it to the
// HttpHandler, and writes back whatever the handler send()s, from any thread, closing the
// connection after the last bytes. It is not an application: routing and JSON live in the
// handler. Invariants: no call blocks the I/O thread; every connection has a deadline (a request
// must arrive within readTimeout, a client must take our bytes within writeTimeout); a request the
// parser refuses is answered with its 4xx and a log line, and never reaches the handler.
// Thread-safety: send(), port(), connectionCount() and stop() may be called from any thread.
#pragma once

#include <poll.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "comm/store/tcp_socket.h"
#include "runtime/serve/http_request.h"

namespace ds::runtime::serve {

struct HttpServerOptions {
  std::string host = "127.0.0.1";  // loopback unless told otherwise
  int port = 0;                    // 0: the kernel picks one (see port())
  HttpLimits limits;
  int maxConnections = 256;  // beyond: 503 and close
  std::chrono::milliseconds readTimeout{30000};
  std::chrono::milliseconds writeTimeout{30000};
  size_t maxPendingWriteBytes = 16u << 20;  // a client this far behind is dropped
};

// Called on the server's I/O thread; must not block. Implementations are shared with the threads
// that call send(), so they synchronize their own state.
class HttpHandler {
 public:
  virtual ~HttpHandler() = default;
  // A whole request arrived on connection `conn`; answer with HttpServer::send(conn, ..., last).
  virtual void onRequest(uint64_t conn, const HttpRequest& req, const std::string& peer) = 0;
  // The connection of a request given to onRequest closed before its last bytes were sent: the
  // client went away (why says how). Later send()s to it are dropped.
  virtual void onDisconnect(uint64_t conn, const std::string& why) = 0;
};

class HttpServer {
 public:
  // Binds and listens (CommError naming host:port when it cannot); serve() starts the thread.
  HttpServer(const HttpServerOptions& opts, HttpHandler& handler);
  ~HttpServer();  // stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const { return port_; }
  void serve();
  // Queues bytes for conn; with last, the connection closes once they are written. A connection
  // that is gone drops them. Never blocks on the client.
  void send(uint64_t conn, std::string bytes, bool last);
  // Stops accepting new connections (the listening socket closes); open ones carry on.
  void stopAccepting();
  // Open connections (those still being read, answered or lingering).
  int connectionCount() const { return connections_.load(); }
  // Ends the I/O thread and closes every connection. Idempotent.
  void stop();

 private:
  struct Conn;
  struct Outgoing {
    uint64_t conn;
    std::string bytes;
    bool last;
  };
  void loop();
  void pollAll(std::vector<pollfd>& fds);  // fills fds, waits until the next event/deadline
  void acceptAll();
  void takeOutbox();
  void readFrom(Conn& c);
  void writeTo(Conn& c);
  void checkDeadlines(Conn& c, std::chrono::steady_clock::time_point now);
  void refuse(Conn& c, const HttpError& e);
  void drop(Conn& c, const std::string& why);

  HttpServerOptions opts_;
  HttpHandler& handler_;
  comm::Fd listener_;
  comm::Fd wakeRead_, wakeWrite_;
  int port_ = 0;
  std::thread thread_;
  std::atomic<bool> stop_{false}, stopAccepting_{false};
  std::atomic<int> connections_{0};
  std::mutex mu_;
  std::vector<Outgoing> outbox_;              // guarded by mu_
  std::vector<std::unique_ptr<Conn>> conns_;  // I/O thread only
  uint64_t nextId_ = 1;
};

}  // namespace ds::runtime::serve
