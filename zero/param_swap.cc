// ParamSwap: see param_swap.h.
#include "zero/param_swap.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <filesystem>
#include <iterator>

#include <fmt/format.h>

#include "core/error.h"
#include "core/log.h"
#include "zero/swap_space.h"

namespace ds::zero {
namespace {
constexpr size_t kBlock = size_t(1) << 20;  // bounce size: a multiple of kIoAlign
constexpr size_t kWriteDepth = 4;           // block writes in flight at once (one bounce each)

// Up to kWriteDepth block writes in flight on one file: next() gives the slot for the next
// write, once that slot's previous write is done; drain() waits for all (a later read sees
// them). Left by an exception, it still waits for every I/O of the file, so that no write reads
// a bounce buffer the caller's unwinding may free (errors of that wait are logged: the first
// error is the one in flight).
class WriteRing {
 public:
  explicit WriteRing(AsyncFile& file) : file_(file), exceptions_(std::uncaught_exceptions()) {}
  ~WriteRing() {
    if (std::uncaught_exceptions() == exceptions_) return;
    try {
      file_.waitAll();
    } catch (const std::exception& e) {
      DS_LOG_WARN("zero", "param swap: another write failed while unwinding: {}", e.what());
    }
  }
  WriteRing(const WriteRing&) = delete;
  WriteRing& operator=(const WriteRing&) = delete;

  size_t next() {
    const size_t slot = next_;
    next_ = (next_ + 1) % kWriteDepth;
    if (inFlight_[slot]) file_.wait(tickets_[slot]);
    inFlight_[slot] = false;
    return slot;
  }
  void write(size_t slot, const void* buf, size_t bytes, size_t offset) {
    tickets_[slot] = file_.writeAsync(buf, bytes, offset);
    inFlight_[slot] = true;
  }
  void drain() {
    for (size_t slot = 0; slot < kWriteDepth; ++slot)
      if (inFlight_[slot]) file_.wait(tickets_[slot]);
    std::fill(std::begin(inFlight_), std::end(inFlight_), false);
  }

 private:
  AsyncFile& file_;
  int exceptions_;
  uint64_t tickets_[kWriteDepth] = {};
  bool inFlight_[kWriteDepth] = {};
  size_t next_ = 0;
};
}  // namespace

ParamSwap::ParamSwap(const std::string& dir, int rank, size_t bytes, bool pin,
                     AsyncFile::Options fileOptions)
    : bytes_(bytes), pin_(pin) {
  for (size_t i = 0; i < kWriteDepth; ++i) bounces_.emplace_back(kBlock, pin);
  const size_t fileBytes = std::max(kBlock, (bytes + kBlock - 1) / kBlock * kBlock);
  checkSwapSpace("offload_param.nvme_path", dir, fileBytes);
  file_ = std::make_unique<AsyncFile>(
      fmt::format("{}/zero_rank{}_pid{}_params.swp", dir, rank, ::getpid()), fileBytes,
      fileOptions);
  std::memset(bounces_[0].data(), 0, kBlock);
  WriteRing ring(*file_);
  for (size_t off = 0; off < fileBytes; off += kBlock)  // the same zeros from one buffer
    ring.write(ring.next(), bounces_[0].data(), kBlock, off);
  ring.drain();
}

ParamSwap::~ParamSwap() {
  try {
    dropAll();
  } catch (const std::exception& e) {
    DS_LOG_WARN("zero", "param swap: read-ahead failed at close: {}", e.what());
  }
}

void ParamSwap::read(size_t offset, size_t count, void* dst) {
  DS_CHECK(offset + count <= bytes_, "param swap read [{}, {}) past {}", offset, offset + count,
           bytes_);
  char* out = static_cast<char*>(dst);
  for (size_t done = 0; done < count;) {
    const size_t pos = offset + done, base = pos / kBlock * kBlock;
    const size_t take = std::min(count - done, base + kBlock - pos);
    file_->wait(file_->readAsync(bounces_[0].data(), kBlock, base));
    std::memcpy(out + done, static_cast<char*>(bounces_[0].data()) + (pos - base), take);
    done += take;
  }
}

void ParamSwap::write(size_t offset, size_t count, const void* src) {
  DS_CHECK(offset + count <= bytes_, "param swap write [{}, {}) past {}", offset, offset + count,
           bytes_);
  dropAll();
  // Each block in its slot's bounce; every block is a different one, so a partial block's read
  // never meets a write of the same block.
  WriteRing ring(*file_);
  const char* source = static_cast<const char*>(src);
  for (size_t done = 0; done < count;) {
    const size_t pos = offset + done, base = pos / kBlock * kBlock;
    const size_t take = std::min(count - done, base + kBlock - pos);
    const size_t slot = ring.next();
    char* bounce = static_cast<char*>(bounces_[slot].data());
    if (take < kBlock) file_->wait(file_->readAsync(bounce, kBlock, base));
    std::memcpy(bounce + (pos - base), source + done, take);
    ring.write(slot, bounce, kBlock, base);
    done += take;
  }
  ring.drain();  // done before returning: a later read sees it
}

void ParamSwap::readAhead(uint64_t key, size_t offset, size_t count) {
  DS_CHECK(offset + count <= bytes_, "param swap read-ahead [{}, {}) past {}", offset,
           offset + count, bytes_);
  if (ahead_.count(key) || count == 0) return;
  const size_t base = offset / kIoAlign * kIoAlign;
  const size_t len = (offset + count - base + kIoAlign - 1) / kIoAlign * kIoAlign;
  AlignedBuffer buffer;
  auto found = spare_.find(len);
  if (found != spare_.end()) {
    buffer = std::move(found->second);
    spare_.erase(found);
  } else {
    buffer = AlignedBuffer(len, pin_);
    aheadBytes_ += len;
    peakAheadBytes_ = std::max(peakAheadBytes_, aheadBytes_);
  }
  const uint64_t ticket = file_->readAsync(buffer.data(), len, base);
  ahead_.emplace(key, Ahead{offset, count, base, std::move(buffer), ticket});
}

bool ParamSwap::take(uint64_t key, size_t offset, size_t count, void* dst) {
  auto found = ahead_.find(key);
  if (found == ahead_.end()) return false;
  Ahead entry = std::move(found->second);
  ahead_.erase(found);
  file_->wait(entry.ticket);
  const bool match = entry.offset == offset && entry.size == count;
  if (match) std::memcpy(dst, static_cast<char*>(entry.buf.data()) + (offset - entry.base), count);
  recycle(std::move(entry.buf));
  return match;
}

bool ParamSwap::aheadCompleted(uint64_t key) {
  auto found = ahead_.find(key);
  return found != ahead_.end() && file_->completed(found->second.ticket);
}

void ParamSwap::dropAll() {
  for (auto& [key, entry] : ahead_) {
    file_->wait(entry.ticket);
    recycle(std::move(entry.buf));
  }
  ahead_.clear();
}

// Keeps a staging buffer for the next read-ahead of the same size (a step reads the same
// parameters in the same order), so steady state allocates nothing.
void ParamSwap::recycle(AlignedBuffer buffer) {
  const size_t len = buffer.bytes();
  spare_.emplace(len, std::move(buffer));
}

}  // namespace ds::zero
