// LineRelay (see line_relay.h).
#include "launcher/ssh/line_relay.h"

#include <unistd.h>

#include <cerrno>

namespace ds::launcher::ssh {

void LineRelay::add(std::string_view data) {
  pending_.append(data);
  size_t end = pending_.rfind('\n');
  if (end == std::string::npos) return;
  if (onLine_) {
    for (size_t start = 0; start <= end;) {
      size_t nl = pending_.find('\n', start);
      onLine_(std::string_view(pending_).substr(start, nl - start));
      start = nl + 1;
    }
  }
  writeAll(std::string_view(pending_).substr(0, end + 1));
  pending_.erase(0, end + 1);
}

void LineRelay::flush() {
  if (pending_.empty()) return;
  pending_ += '\n';
  writeAll(pending_);
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
