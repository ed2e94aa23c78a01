// BSD socket calls for the store, wrapped once: getaddrinfo, bind/listen, connect with backoff,
// poll-bounded send/recv.
#include "comm/store/tcp_socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "core/error.h"

namespace ds::comm {

namespace {

std::string errText(int err) { return std::strerror(err); }

struct AddrInfo {
  addrinfo* list = nullptr;
  ~AddrInfo() {
    if (list) freeaddrinfo(list);
  }
};

// Resolves host:port; returns the getaddrinfo error text on failure (empty on success).
std::string resolve(const std::string& host, int port, bool passive, AddrInfo& out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (passive) hints.ai_flags = AI_PASSIVE;
  std::string p = std::to_string(port);
  const char* h = host.empty() ? nullptr : host.c_str();
  int rc = getaddrinfo(h, p.c_str(), &hints, &out.list);
  if (rc != 0) return rc == EAI_SYSTEM ? errText(errno) : gai_strerror(rc);
  return {};
}

int remainingMs(Clock::time_point deadline) {
  if (deadline == Clock::time_point::max()) return -1;
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  if (left.count() <= 0) return 0;
  return static_cast<int>(std::min<int64_t>(left.count(), 1 << 30));
}

// Waits for `events` on fd; false at the deadline.
bool pollFor(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int ms = remainingMs(deadline);
    int rc = ::poll(&p, 1, ms);
    if (rc > 0) return true;
    if (rc == 0) return false;
    if (errno != EINTR) throw SystemError("poll on a store socket", errno);
  }
}

std::string addr(const std::string& host, int port) {
  bool v6 = host.find(':') != std::string::npos;
  return v6 ? "[" + host + "]:" + std::to_string(port) : host + ":" + std::to_string(port);
}

}  // namespace

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) {
    reset(o.fd_);
    o.fd_ = -1;
  }
  return *this;
}

void Fd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

void setNoDelay(int fd) {
  int one = 1;
  DS_SYS_CHECK(::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one), "TCP_NODELAY");
}

Fd listenTcp(const std::string& host, int port, int backlog) {
  std::string h = host == "0.0.0.0" ? "" : host;
  AddrInfo ai;
  std::string err = resolve(h, port, true, ai);
  if (!err.empty())
    throw CommError(
        fmt::format("cannot listen on {}: cannot resolve '{}': {}", addr(host, port), host, err));
  int lastErr = 0;
  for (addrinfo* a = ai.list; a; a = a->ai_next) {
    Fd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    if (!fd) {
      lastErr = errno;
      continue;
    }
    int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd.get(), a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd.get(), backlog) == 0)
      return fd;
    lastErr = errno;
  }
  if (lastErr == EADDRINUSE)
    throw CommError(
        fmt::format("cannot listen on {}: address already in use (another job, or "
                    "a store of an earlier run, holds MASTER_PORT {}; pick another "
                    "port with --master_port / MASTER_PORT)",
                    addr(host, port), port));
  throw CommError(fmt::format("cannot listen on {}: {}", addr(host, port), errText(lastErr)));
}

int localPort(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  DS_SYS_CHECK(::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len), "getsockname");
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
}

std::string peerAddress(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
  char buf[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET6) {
    auto* s = reinterpret_cast<sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &s->sin6_addr, buf, sizeof buf);
    return addr(buf, ntohs(s->sin6_port));
  }
  auto* s = reinterpret_cast<sockaddr_in*>(&ss);
  inet_ntop(AF_INET, &s->sin_addr, buf, sizeof buf);
  return addr(buf, ntohs(s->sin_port));
}

namespace {

// One non-blocking connect attempt bounded by the deadline; returns the fd or sets *err.
Fd tryConnect(const addrinfo* a, Clock::time_point deadline, int* err) {
  Fd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
  if (!fd) {
    *err = errno;
    return Fd();
  }
  if (::connect(fd.get(), a->ai_addr, a->ai_addrlen) != 0) {
    if (errno != EINPROGRESS) {
      *err = errno;
      return Fd();
    }
    if (!pollFor(fd.get(), POLLOUT, deadline)) {
      *err = ETIMEDOUT;
      return Fd();
    }
    int soErr = 0;
    socklen_t len = sizeof soErr;
    ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &soErr, &len);
    if (soErr != 0) {
      *err = soErr;
      return Fd();
    }
  }
  int flags = ::fcntl(fd.get(), F_GETFL);
  ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

}  // namespace

Fd connectTcp(const std::string& host, int port, Clock::time_point deadline) {
  auto start = Clock::now();
  auto backoff = std::chrono::milliseconds(10);
  std::string last = "no attempt made";
  for (;;) {
    AddrInfo ai;
    std::string err = resolve(host, port, false, ai);
    if (err.empty()) {
      for (addrinfo* a = ai.list; a; a = a->ai_next) {
        int e = 0;
        Fd fd = tryConnect(a, deadline, &e);
        if (fd) {
          setNoDelay(fd.get());
          return fd;
        }
        last = errText(e);
      }
    } else {
      last = fmt::format("cannot resolve '{}': {}", host, err);
    }
    auto now = Clock::now();
    if (now + backoff >= deadline) break;
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(500));
  }
  double secs = std::chrono::duration<double>(Clock::now() - start).count();
  throw TimeoutError(
      fmt::format("could not connect to the store at {} within {:.1f} s (last "
                  "error: {}); is rank 0 running and MASTER_ADDR/MASTER_PORT "
                  "right?",
                  addr(host, port), secs, last));
}

void sendAll(int fd, const void* data, size_t n, Clock::time_point deadline,
             const std::string& peer, const char* what) {
  auto p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    if (!pollFor(fd, POLLOUT, deadline))
      throw TimeoutError(
          fmt::format("sending {} to {} timed out ({} bytes unsent)", what, peer, n));
    ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      throw CommError(fmt::format("sending {} to {} failed: {}", what, peer, errText(errno)));
    }
    p += k;
    n -= static_cast<size_t>(k);
  }
}

bool recvAll(int fd, void* data, size_t n, Clock::time_point deadline, const std::string& peer,
             const char* what, bool eofOk) {
  auto p = static_cast<uint8_t*>(data);
  size_t got = 0;
  while (got < n) {
    if (!pollFor(fd, POLLIN, deadline))
      throw TimeoutError(fmt::format("receiving {} from {} timed out ({} of {} bytes received)",
                                     what, peer, got, n));
    ssize_t k = ::recv(fd, p + got, n - got, MSG_DONTWAIT);
    if (k == 0) {
      if (got == 0 && eofOk) return false;
      throw CommError(
          fmt::format("{} closed the connection while receiving {} ({} of {} bytes "
                      "received)",
                      peer, what, got, n));
    }
    if (k < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      throw CommError(fmt::format("receiving {} from {} failed: {}", what, peer, errText(errno)));
    }
    got += static_cast<size_t>(k);
  }
  return true;
}

}  // namespace ds::comm
