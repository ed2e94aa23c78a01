// AsyncFile: one swap file with asynchronous positioned reads and writes (liburing when built and
// permitted by the kernel; otherwise a worker thread doing pread/pwrite, with a logged note).
// Opened with O_DIRECT where the filesystem allows it (else buffered, with a logged note); then
// buffers, offsets and sizes must be multiples of kIoAlign, which callers guarantee by using
// AlignedBuffer and aligned tiles. Every I/O is cut into requests of at most maxRequestBytes
// (Linux moves at most 0x7ffff000 bytes per read/write) and a short completion is resubmitted for
// the rest, so one ticket may cover any size. Owns the fd (RAII, file unlinked on close). Not
// thread-safe: one thread submits and waits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace ds::zero {

constexpr size_t kIoAlign = 4096;
// The most bytes Linux transfers in one read/write (MAX_RW_COUNT), a multiple of kIoAlign.
constexpr size_t kMaxIoRequest = 0x7ffff000;

// Bytes submitted for reading and writing over every AsyncFile of this process so far (the run
// summary's nvme traffic; the ZeRO-Infinity bench divides it by the step time).
struct SwapIoTotals {
  uint64_t bytesRead = 0, bytesWritten = 0;
};
SwapIoTotals swapIoTotals();

// A page-aligned heap buffer (posix_memalign); optionally mlock'ed (pin_memory, best effort).
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t bytes, bool pin = false);
  ~AlignedBuffer();
  AlignedBuffer(AlignedBuffer&& other) noexcept;
  AlignedBuffer& operator=(AlignedBuffer&& other) noexcept;
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  bool locked_ = false;
};

class AsyncFile {
 public:
  struct Options {
    // Bytes per read/write request (rounded down to kIoAlign, at least kIoAlign); tests lower it
    // to exercise the split path with small files.
    size_t maxRequestBytes = kMaxIoRequest;
    // false: the pread/pwrite thread even where io_uring works. The environment variable
    // DS_ZERO_NO_URING=1 forces the same for every swap file.
    bool allowUring = true;
    // io_uring requests in flight at once (ring size; 1..4096). The aio block's queue_depth.
    unsigned queueDepth = 64;
  };
  // Creates (truncates) path of `bytes` bytes (a multiple of kIoAlign).
  AsyncFile(const std::string& path, size_t bytes);
  AsyncFile(const std::string& path, size_t bytes, Options opts);
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
  static bool uringBuilt();  // compiled with liburing
  // Read/write requests handed to the kernel (or the thread) so far, resubmissions included.
  uint64_t requestsIssued() const;
  int fd() const;  // diagnostics/tests (e.g. truncate under it to provoke a short read)
  const std::string& path() const;
  size_t bytes() const;

  struct Impl;

 private:
  void startIo(bool allowUring);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ds::zero
