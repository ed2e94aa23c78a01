// OutputRelay (see output_relay.h).
#include "launcher/agent/output_relay.h"

#include <algorithm>

namespace ds::launcher {

void OutputRelay::add(UniqueFd readEnd, const std::string& prefix, int destFd) {
  int flags = ::fcntl(readEnd.get(), F_GETFL);
  ::fcntl(readEnd.get(), F_SETFL, flags | O_NONBLOCK);
  streams_.push_back(Stream{std::move(readEnd), LinePrefixer(prefix), destFd});
}

void OutputRelay::pollFds(std::vector<struct pollfd>* fds) const {
  for (const auto& s : streams_)
    if (s.fd.valid()) fds->push_back({s.fd.get(), POLLIN, 0});
}

size_t OutputRelay::openCount() const {
  return static_cast<size_t>(std::count_if(streams_.begin(), streams_.end(),
                                           [](const Stream& s) { return s.fd.valid(); }));
}

void OutputRelay::write(int dest, const std::string& text) {
  if (text.empty() ||
      std::find(brokenDests_.begin(), brokenDests_.end(), dest) != brokenDests_.end())
    return;
  if (!writeAll(dest, text.data(), text.size())) brokenDests_.push_back(dest);
}

void OutputRelay::onReady(int fd) {
  auto it = std::find_if(streams_.begin(), streams_.end(),
                         [fd](const Stream& s) { return s.fd.get() == fd; });
  if (it == streams_.end()) return;
  char buf[65536];
  std::string out;
  // At most 4 reads per wake-up: one chatty rank cannot starve the others or the signals.
  for (int i = 0; i < 4; ++i) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n > 0) {
      it->lines.feed(buf, static_cast<size_t>(n), &out);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;
    it->lines.finish(&out);  // EOF (or a read error): the stream is over
    it->fd.reset();
    break;
  }
  write(it->dest, out);
}

void OutputRelay::closeAll() {
  for (auto& s : streams_) {
    if (!s.fd.valid()) continue;
    std::string out;
    s.lines.finish(&out);
    write(s.dest, out);
    s.fd.reset();
  }
}

}  // namespace ds::launcher
