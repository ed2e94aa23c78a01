// Test helpers for multi-rank code. runRanks(n, fn) runs fn(rank) on n threads and rethrows the
// first exception on the caller's thread; rank threads must not use REQUIRE (Catch2 is not
// thread-safe): return values and assert on the main thread. Every join has a timeout.
#pragma once

#include <chrono>
#include <functional>
#include <string>

namespace ds::test {

// Runs fn(0..n-1) concurrently. Throws the first failure; throws TimeoutError if a rank has not
// returned after `timeout` (the stuck thread is detached and the process should then exit).
void runRanks(int n, const std::function<void(int rank)>& fn,
              std::chrono::milliseconds timeout = std::chrono::seconds(120));

// A free TCP port on 127.0.0.1 (bound then released), picked at random below the kernel's
// ephemeral range (net.ipv4.ip_local_port_range): the kernel never hands those out for bind(0)
// or an outgoing connection, so a concurrent test's connection cannot take the port between the
// pick and the real listen (it did: a store's "address already in use" under ctest -j2).
int freePort();

// A fresh empty directory under $TMPDIR, removed when the object is destroyed.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Writes text to path (truncating).
void writeFile(const std::string& path, const std::string& text);
std::string readFile(const std::string& path);

// The built dsrt as a shell command prefix ("env -u RANK ... <build>/dsrt "), with the rank
// variables a surrounding launcher may have set removed, so it runs as a single process.
std::string dsrtCommand();

// Runs a shell command with a timeout; returns its exit status (128+signal if killed) and
// captures stdout+stderr into *output when given. Kills the command's process group on timeout
// and returns 124.
int runCommand(const std::string& cmd, std::string* output,
               std::chrono::milliseconds timeout = std::chrono::seconds(120));

}  // namespace ds::test
