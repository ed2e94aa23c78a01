// AsyncFile: one swap file with asynchronous positioned reads and writes (liburing when built and
// permitted by the kernel; otherwise a worker thread doing pread/pwrite, with a logged note).
// Opened with O_DIRECT where the filesystem allows it (else buffered, with a logged note); then
// buffers, offsets and sizes must be multiples of kIoAlign, which callers guarantee by using
// AlignedBuffer and aligned tiles. Owns the fd (RAII, file unlinked on close). Not thread-safe:
// one thread submits and waits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace ds::zero {

constexpr size_t kIoAlign = 4096;

// A page-aligned heap buffer (posix_memalign); optionally mlock'ed (pin_memory, best effort).
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t bytes, bool pin = false);
  ~AlignedBuffer();
  AlignedBuffer(AlignedBuffer&& o) noexcept;
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept;
  void* data() const { return p_; }
  size_t bytes() const { return bytes_; }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
  bool locked_ = false;
};

class AsyncFile {
 public:
  // Creates (truncates) path of `bytes` bytes (a multiple of kIoAlign).
  AsyncFile(const std::string& path, size_t bytes);
  ~AsyncFile();
  AsyncFile(const AsyncFile&) = delete;
  AsyncFile& operator=(const AsyncFile&) = delete;

  // Submits an I/O; returns a ticket for wait(). buf stays alive until waited.
  uint64_t readAsync(void* buf, size_t bytes, size_t offset);
  uint64_t writeAsync(const void* buf, size_t bytes, size_t offset);
  void wait(uint64_t ticket);  // throws SystemError on failure, TimeoutError past the deadline
  void waitAll();
  // Non-blocking: whether the I/O has finished (true for a ticket already waited for). Reaps
  // the completions that are there; the result is still collected by wait().
  bool completed(uint64_t ticket);

  bool direct() const;
  bool usingUring() const;
  const std::string& path() const;
  size_t bytes() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace ds::zero
