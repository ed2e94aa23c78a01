// LineRelay (see line_relay.h).
#include "launcher/ssh/line_relay.h"

#include <unistd.h>

#include <cerrno>

namespace ds::launcher::ssh {

void LineRelay::add(std::string_view data) {
  pending_.append(data);
  size_t end = pending_.rfind('\n');
  if (end == std::string::npos) return;
  std::string_view lines = std::string_view(pending_).substr(0, end + 1);
  writeAll(lines);
  while (onLine_ && !lines.empty()) {
    size_t nl = lines.find('\n');
    onLine_(lines.substr(0, nl));
    lines.remove_prefix(nl + 1);
  }
  pending_.erase(0, end + 1);
}

void LineRelay::flush() {
  if (pending_.empty()) return;
  pending_ += '\n';
  writeAll(pending_);
  if (onLine_) onLine_(std::string_view(pending_).substr(0, pending_.size() - 1));
  pending_.clear();
}

void LineRelay::writeAll(std::string_view text) {
  std::lock_guard<std::mutex> lock(*mutex_);
  while (!text.empty()) {
    ssize_t n = ::write(fd_, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the reader went away (EPIPE): output is lost, the job is not
    text.remove_prefix(static_cast<size_t>(n));
  }
}

}  // namespace ds::launcher::ssh
