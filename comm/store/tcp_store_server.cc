// TcpStoreServer: accept loop (poll on the listening socket and a wake pipe) and one blocking
// reader thread per connection running a StoreSession.
#include "comm/store/tcp_store_server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "comm/store/store_protocol.h"
#include "comm/store/store_session.h"
#include "core/error.h"
#include "core/log.h"

namespace ds::comm {

TcpStoreServer::TcpStoreServer(TcpStoreServerOptions options) : options_(std::move(options)) {
  listen_ = listenTcp(options_.host, options_.port);
  port_ = localPort(listen_.get());
  int p[2];
  DS_SYS_CHECK(::pipe2(p, O_CLOEXEC), "pipe for the store server's wakeup");
  wakeRead_.reset(p[0]);
  wakeWrite_.reset(p[1]);
  acceptThread_ = std::thread([this] { acceptLoop(); });
  DS_LOG_DEBUG("store", "store server listening on {}:{}", options_.host, port_);
}

TcpStoreServer::~TcpStoreServer() { stop(); }

void TcpStoreServer::stop() {
  if (stopping_.exchange(true)) {
    if (acceptThread_.joinable()) acceptThread_.join();
    return;
  }
  char wake = 1;
  (void)!::write(wakeWrite_.get(), &wake, 1);
  if (acceptThread_.joinable()) acceptThread_.join();
  data_.shutdown();
  std::list<std::unique_ptr<Conn>> conns;
  {
    std::lock_guard<std::mutex> g(connsMu_);
    conns.swap(conns_);
  }
  for (auto& c : conns) ::shutdown(c->fd.get(), SHUT_RDWR);
  for (auto& c : conns)
    if (c->thread.joinable()) c->thread.join();
}

size_t TcpStoreServer::openConnections() {
  std::lock_guard<std::mutex> g(connsMu_);
  size_t n = 0;
  for (auto& c : conns_) n += c->done ? 0 : 1;
  return n;
}

void TcpStoreServer::reapDone() {
  std::list<std::unique_ptr<Conn>> done;
  {
    std::lock_guard<std::mutex> g(connsMu_);
    for (auto it = conns_.begin(); it != conns_.end();) {
      if ((*it)->done) {
        done.push_back(std::move(*it));
        it = conns_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& c : done) c->thread.join();
}

void TcpStoreServer::acceptLoop() {
  while (!stopping_) {
    pollfd p[2] = {{listen_.get(), POLLIN, 0}, {wakeRead_.get(), POLLIN, 0}};
    int rc = ::poll(p, 2, -1);
    if (rc < 0) {
      if (errno == EINTR) continue;
      DS_LOG_ERROR("store", "store server poll failed: {}", std::strerror(errno));
      return;
    }
    if (p[1].revents) return;
    if (!(p[0].revents & POLLIN)) continue;
    Fd fd(::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!fd) continue;  // ECONNABORTED, EMFILE...: the client sees a closed connection
    reapDone();
    auto c = std::make_unique<Conn>();
    c->peer = peerAddress(fd.get());
    {
      std::lock_guard<std::mutex> g(connsMu_);
      if (conns_.size() >= options_.maxConnections) {
        DS_LOG_WARN("store", "refused store connection from {}: {} connections already open",
                    c->peer, conns_.size());
        ++refused_;
        continue;
      }
      setNoDelay(fd.get());
      c->fd = std::move(fd);
      Conn* raw = c.get();
      conns_.push_back(std::move(c));
      raw->thread = std::thread([this, raw] { serve(raw); });
    }
  }
}

void TcpStoreServer::serve(Conn* c) {
  StoreSession session(data_, options_.token, c->peer);
  const int fd = c->fd.get();
  auto handshakeDeadline = Clock::now() + options_.handshakeTimeout;
  try {
    while (!stopping_) {
      auto deadline = session.authenticated() ? Clock::time_point::max() : handshakeDeadline;
      uint8_t header[proto::kHeaderBytes];
      if (!recvAll(fd, header, sizeof header, deadline, c->peer, "a frame header", true)) break;
      Bytes reply;
      uint32_t n = 0;
      try {
        n = proto::frameLength(header);
        if (!session.authenticated() && n > options_.maxUnauthenticatedFrame)
          throw proto::ProtocolError(fmt::format(
              "first frame of {} bytes exceeds the {} bytes allowed before the job token is "
              "presented",
              n, options_.maxUnauthenticatedFrame));
      } catch (const proto::ProtocolError& e) {
        reply = session.refuseFrame(e.what());
      }
      if (reply.empty()) {
        Bytes body(n);
        recvAll(fd, body.data(), n, deadline, c->peer, "a frame body");
        reply = session.onFrame(body.data(), body.size());
      }
      Bytes out = proto::frame(reply);
      sendAll(fd, out.data(), out.size(), Clock::now() + options_.sendTimeout, c->peer,
              "a store reply");
      if (session.closing()) break;
    }
  } catch (const Error& e) {
    if (!stopping_) DS_LOG_DEBUG("store", "store connection from {} ended: {}", c->peer, e.what());
  } catch (const std::exception& e) {  // bad_alloc and the like: end this connection only
    DS_LOG_WARN("store", "store connection from {} ended: {}", c->peer, e.what());
  }
  if (session.closing() && !session.authenticated()) ++refused_;
  ::shutdown(fd, SHUT_RDWR);
  {
    std::lock_guard<std::mutex> g(connsMu_);
    c->done = true;
  }
  idleCv_.notify_all();
}

bool TcpStoreServer::waitIdle(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(connsMu_);
  return idleCv_.wait_for(lock, timeout, [&] {
    for (auto& c : conns_)
      if (!c->done) return false;
    return true;
  });
}

}  // namespace ds::comm
