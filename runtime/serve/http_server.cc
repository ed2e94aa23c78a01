// HttpServer (see http_server.h): one poll loop over the wake pipe, the listener and the
// connections. A connection's life: reading (parser) -> handed (handler owns the answer) ->
// closing (last bytes queued; written, then SHUT_WR and a short linger so the client reads them
// before the close) -> gone.
#include "runtime/serve/http_server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "core/error.h"
#include "core/log.h"
#include "runtime/serve/http_response.h"

namespace ds::runtime::serve {

using Clock = std::chrono::steady_clock;

namespace {
constexpr auto kLinger = std::chrono::milliseconds(2000);  // after our last byte, for the client

void setNonBlocking(int fd) {
  const int flags = fcntl(fd, F_GETFL, 0);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
    throw SystemError("fcntl(O_NONBLOCK) on an HTTP socket", errno);
}
}  // namespace

struct HttpServer::Conn {
  enum class State { kReading, kHanded, kClosing, kGone };
  uint64_t id = 0;
  comm::Fd fd;
  std::string peer;
  HttpRequestParser parser;
  State state = State::kReading;
  std::string out;
  size_t outSent = 0;
  bool shutWr = false, sentContinue = false;
  Clock::time_point readDeadline, lastWrite, lingerUntil;
  explicit Conn(HttpLimits l) : parser(l) {}
};

HttpServer::HttpServer(const HttpServerOptions& opts, HttpHandler& handler)
    : opts_(opts), handler_(handler) {
  if (opts_.port < 0 || opts_.port > 65535)
    throw ConfigError(fmt::format("--port {}: expected 0..65535", opts_.port));
  listener_ = comm::listenTcp(opts_.host, opts_.port);
  setNonBlocking(listener_.get());
  port_ = comm::localPort(listener_.get());
  int p[2];
  if (pipe2(p, O_NONBLOCK | O_CLOEXEC) != 0) throw SystemError("pipe2 for the HTTP server", errno);
  wakeRead_.reset(p[0]);
  wakeWrite_.reset(p[1]);
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::serve() {
  DS_CHECK(!thread_.joinable(), "HttpServer::serve called twice");
  thread_ = std::thread([this] {
    try {
      loop();
    } catch (const std::exception& e) {
      DS_LOG_ERROR("serve", "HTTP I/O thread failed: {}", e.what());
    }
  });
}

void HttpServer::send(uint64_t conn, std::string bytes, bool last) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    outbox_.push_back({conn, std::move(bytes), last});
  }
  const char b = 1;
  [[maybe_unused]] ssize_t n = ::write(wakeWrite_.get(), &b, 1);  // full pipe: already woken
}

void HttpServer::stopAccepting() {
  stopAccepting_ = true;
  send(0, {}, false);  // wake the loop
}

void HttpServer::stop() {
  stop_ = true;
  send(0, {}, false);
  if (thread_.joinable()) thread_.join();
  conns_.clear();
  connections_ = 0;
}

void HttpServer::loop() {
  std::vector<pollfd> fds;
  while (!stop_) {
    if (stopAccepting_ && listener_) listener_.reset();
    pollAll(fds);
    if (fds[0].revents & POLLIN) {
      char sink[256];
      while (::read(wakeRead_.get(), sink, sizeof sink) > 0) {
      }
    }
    takeOutbox();
    const size_t n = conns_.size();  // acceptAll appends; those are polled next round
    if (fds[1].revents & POLLIN) acceptAll();
    const auto now = Clock::now();
    for (size_t i = 0; i < n; ++i) {
      Conn& c = *conns_[i];
      const short re = fds[i + 2].revents;
      if (c.state != Conn::State::kGone && (re & (POLLIN | POLLHUP | POLLERR))) readFrom(c);
      if (c.state != Conn::State::kGone && (re & POLLOUT)) writeTo(c);
      if (c.state != Conn::State::kGone) checkDeadlines(c, now);
    }
    std::erase_if(conns_, [](const auto& c) { return c->state == Conn::State::kGone; });
    connections_ = static_cast<int>(conns_.size());
  }
}

void HttpServer::pollAll(std::vector<pollfd>& fds) {
  const auto now = Clock::now();
  Clock::time_point next = now + std::chrono::seconds(1);  // at least once a second: stop_
  fds.clear();
  fds.push_back({wakeRead_.get(), POLLIN, 0});
  fds.push_back({listener_ ? listener_.get() : -1, POLLIN, 0});  // -1: ignored by poll
  for (auto& c : conns_) {
    const bool unsent = c->outSent < c->out.size();
    fds.push_back({c->fd.get(), static_cast<short>(unsent ? POLLIN | POLLOUT : POLLIN), 0});
    if (c->state == Conn::State::kReading) next = std::min(next, c->readDeadline);
    if (unsent) next = std::min(next, c->lastWrite + opts_.writeTimeout);
    if (c->shutWr) next = std::min(next, c->lingerUntil);
  }
  const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count();
  const int rc = ::poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(wait, 0) + 1));
  if (rc < 0 && errno != EINTR) throw SystemError("poll in the HTTP server", errno);
  if (rc < 0)
    for (auto& f : fds) f.revents = 0;
}

void HttpServer::acceptAll() {
  for (;;) {
    const int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
        DS_LOG_WARN("serve", "accept on port {} failed: {}", port_, std::strerror(errno));
      return;
    }
    auto c = std::make_unique<Conn>(opts_.limits);
    c->id = nextId_++;
    c->fd.reset(fd);
    c->peer = comm::peerAddress(fd);
    c->readDeadline = Clock::now() + opts_.readTimeout;
    c->lastWrite = Clock::now();
    if (static_cast<int>(conns_.size()) >= opts_.maxConnections) {
      refuse(*c, HttpError(503, fmt::format("the server has its maximum of {} open connections; "
                                            "retry later",
                                            opts_.maxConnections)));
      writeTo(*c);
    }
    conns_.push_back(std::move(c));
  }
}

void HttpServer::takeOutbox() {
  std::vector<Outgoing> items;
  {
    std::lock_guard<std::mutex> lock(mu_);
    items.swap(outbox_);
  }
  for (auto& item : items) {
    auto it = std::find_if(conns_.begin(), conns_.end(),
                           [&](const auto& c) { return c->id == item.conn; });
    if (it == conns_.end() || (*it)->state != Conn::State::kHanded) continue;
    Conn& c = **it;
    if (c.outSent == c.out.size()) c.lastWrite = Clock::now();  // the write clock starts now
    c.out += item.bytes;
    if (item.last) c.state = Conn::State::kClosing;
    if (c.out.size() - c.outSent > opts_.maxPendingWriteBytes) {
      drop(c, fmt::format("the client is not reading: over {} bytes unsent",
                          opts_.maxPendingWriteBytes));
      continue;
    }
    writeTo(c);
  }
}

void HttpServer::readFrom(Conn& c) {
  char buf[16384];
  for (;;) {
    const ssize_t n = ::recv(c.fd.get(), buf, sizeof buf, 0);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    if (n <= 0) {
      const std::string why = n == 0 ? "the client closed the connection"
                                     : fmt::format("read failed: {}", std::strerror(errno));
      if (c.state == Conn::State::kClosing && c.outSent == c.out.size()) {
        c.state = Conn::State::kGone;  // the answer was delivered; this is the expected close
      } else {
        drop(c, why);
      }
      return;
    }
    if (c.state != Conn::State::kReading) continue;  // bytes after the request: ignored
    try {
      if (!c.parser.feed(std::string_view(buf, static_cast<size_t>(n)))) {
        if (c.parser.awaitsContinue() && !c.sentContinue) {  // curl's Expect for large bodies
          c.sentContinue = true;
          c.out += "HTTP/1.1 100 Continue\r\n\r\n";
          writeTo(c);
        }
        continue;
      }
    } catch (const HttpError& e) {
      refuse(c, e);
      writeTo(c);
      return;
    }
    c.state = Conn::State::kHanded;
    try {
      handler_.onRequest(c.id, c.parser.request(), c.peer);
    } catch (const std::exception& e) {  // a bug in the handler must not end the server
      DS_LOG_ERROR("serve", "request {} from {}: handler failed: {}", c.id, c.peer, e.what());
      c.state = Conn::State::kReading;  // so refuse() may answer it
      refuse(c, HttpError(500, fmt::format("internal error: {}", e.what())));
      writeTo(c);
    }
  }
}

void HttpServer::writeTo(Conn& c) {
  while (c.outSent < c.out.size()) {
    const ssize_t n =
        ::send(c.fd.get(), c.out.data() + c.outSent, c.out.size() - c.outSent, MSG_NOSIGNAL);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    if (n < 0) {
      drop(c, fmt::format("write failed: {}", std::strerror(errno)));
      return;
    }
    c.outSent += static_cast<size_t>(n);
    c.lastWrite = Clock::now();
  }
  c.out.clear();
  c.outSent = 0;
  if (c.state == Conn::State::kClosing && !c.shutWr) {
    ::shutdown(c.fd.get(), SHUT_WR);  // the client sees EOF; we linger for its close
    c.shutWr = true;
    c.lingerUntil = Clock::now() + kLinger;
  }
}

void HttpServer::checkDeadlines(Conn& c, Clock::time_point now) {
  if (stopAccepting_ && c.state == Conn::State::kReading && !c.parser.started()) {
    c.state = Conn::State::kGone;  // shutting down: an idle connection is not waited for
    return;
  }
  if (c.state == Conn::State::kReading && now >= c.readDeadline) {
    if (!c.parser.started()) {
      c.state = Conn::State::kGone;  // an idle connection: nothing to answer
      return;
    }
    refuse(c, HttpError(408, fmt::format("the request did not arrive whole within {} ms",
                                         opts_.readTimeout.count())));
    writeTo(c);
  } else if (c.outSent < c.out.size() && now >= c.lastWrite + opts_.writeTimeout) {
    drop(c, fmt::format("the client took none of our bytes for {} ms", opts_.writeTimeout.count()));
  } else if (c.shutWr && now >= c.lingerUntil) {
    c.state = Conn::State::kGone;
  }
}

void HttpServer::refuse(Conn& c, const HttpError& e) {
  DS_LOG_WARN("serve", "{} from {}: {}", e.status(), c.peer, e.what());
  c.out += httpErrorResponse(e.status(), e.what());
  c.state = Conn::State::kClosing;
}

void HttpServer::drop(Conn& c, const std::string& why) {
  const bool handed = c.state == Conn::State::kHanded ||
                      (c.state == Conn::State::kClosing && c.outSent < c.out.size());
  c.state = Conn::State::kGone;
  if (!handed) return;
  DS_LOG_WARN("serve", "connection {} from {} dropped mid-response: {}", c.id, c.peer, why);
  handler_.onDisconnect(c.id, why);
}

}  // namespace ds::runtime::serve
