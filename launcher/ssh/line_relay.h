// LineRelay: forwards one remote stream (stdout or stderr of one host) to a local fd in whole
// lines, so that lines of different hosts never interleave mid-line. Not a log formatter: the
// remote agent already prefixes its ranks' lines. Thread-safe across relays sharing one mutex.
#pragma once

#include <functional>
#include <mutex>
#include <string>
#include <string_view>

namespace ds::launcher::ssh {

class LineRelay {
 public:
  // `fd` is not owned; `mutex` serialises writes of all relays to the same terminal/pipe.
  LineRelay(int fd, std::mutex* mutex) : fd_(fd), mutex_(mutex) {}
  // `onLine` also sees every complete line (without its '\n') before it is written.
  LineRelay(int fd, std::mutex* mutex, std::function<void(std::string_view)> onLine)
      : fd_(fd), mutex_(mutex), onLine_(std::move(onLine)) {}
  ~LineRelay() { flush(); }
  LineRelay(const LineRelay&) = delete;
  LineRelay& operator=(const LineRelay&) = delete;

  // Appends data; writes out every complete line.
  void add(std::string_view data);
  // Writes a trailing partial line (with a newline added).
  void flush();

 private:
  void writeAll(std::string_view text);
  int fd_;
  std::mutex* mutex_;
  std::function<void(std::string_view)> onLine_;
  std::string pending_;
};

}  // namespace ds::launcher::ssh
