// ParamSwap: the stage-3 parameter partition kept in an NVMe swap file (offload_param nvme):
// synchronous byte-range reads and writes through aligned bounce buffers (whole aligned blocks
// are read, patched and written back, so O_DIRECT works; a write keeps a ring of 1 MiB blocks in
// flight and returns when all are done), and asynchronous read-ahead of
// a range into a staging buffer of its own, collected later by take(). Invariant: a write first
// waits for and discards every read-ahead, so take() never returns stale bytes. Not the
// optimizer's swap (OptimizerPartition), not thread-safe: the training thread alone uses it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "zero/async_file.h"

namespace ds::zero {

class ParamSwap {
 public:
  // A file of at least `bytes` bytes under dir (created); zero-filled. pin: mlock the bounce and
  // staging buffers (offload_param.pin_memory; best effort).
  ParamSwap(const std::string& dir, int rank, size_t bytes, bool pin = false,
            AsyncFile::Options fileOptions = {});
  ~ParamSwap();  // waits for the read-aheads in flight (their buffers outlive the I/O)
  ParamSwap(const ParamSwap&) = delete;
  ParamSwap& operator=(const ParamSwap&) = delete;
  void read(size_t offset, size_t count, void* dst);
  void write(size_t offset, size_t count, const void* src);
  size_t bytes() const { return bytes_; }
  // The bounce buffers plus the most read-ahead staging held at once.
  size_t bufferBytes() const { return bounces_.size() * bounces_[0].bytes() + peakAheadBytes_; }

  // Submits the read of [offset, offset+count) under `key` (no-op when key is already pending).
  void readAhead(uint64_t key, size_t offset, size_t count);
  bool pending(uint64_t key) const { return ahead_.count(key) > 0; }
  // Waits for key's read-ahead and copies its bytes to dst; false (nothing done) when there is
  // none or it covers another range.
  bool take(uint64_t key, size_t offset, size_t count, void* dst);
  // Whether the file layer has finished key's read-ahead (non-blocking; false when none).
  bool aheadCompleted(uint64_t key);
  void dropAll();  // waits for every read-ahead and discards it

 private:
  struct Ahead {
    size_t offset, size, base;  // requested range; base = aligned start of the staging
    AlignedBuffer buf;
    uint64_t ticket;
  };
  void recycle(AlignedBuffer buffer);

  size_t bytes_;
  std::unique_ptr<AsyncFile> file_;
  std::vector<AlignedBuffer> bounces_;  // a ring: [0] also for synchronous reads
  std::map<uint64_t, Ahead> ahead_;
  std::multimap<size_t, AlignedBuffer> spare_;  // staging buffers kept for reuse, by size
  bool pin_ = false;
  size_t aheadBytes_ = 0, peakAheadBytes_ = 0;  // staging held (in flight + spare)
};

}  // namespace ds::zero
