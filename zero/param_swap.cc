// ParamSwap: see param_swap.h.
#include "zero/param_swap.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "core/error.h"
#include "core/log.h"
#include "zero/swap_space.h"

namespace ds::zero {
namespace {
constexpr size_t kBlock = size_t(1) << 20;  // bounce size: a multiple of kIoAlign
}

ParamSwap::ParamSwap(const std::string& dir, int rank, size_t bytes, bool pin,
                     AsyncFile::Options fileOptions)
    : bytes_(bytes), bounce_(kBlock, pin), pin_(pin) {
  const size_t fileBytes = std::max(kBlock, (bytes + kBlock - 1) / kBlock * kBlock);
  checkSwapSpace("offload_param.nvme_path", dir, fileBytes);
  file_ = std::make_unique<AsyncFile>(
      fmt::format("{}/zero_rank{}_pid{}_params.swp", dir, rank, ::getpid()), fileBytes,
      fileOptions);
  std::memset(bounce_.data(), 0, kBlock);
  for (size_t off = 0; off < fileBytes; off += kBlock)
    file_->wait(file_->writeAsync(bounce_.data(), kBlock, off));
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
    file_->wait(file_->readAsync(bounce_.data(), kBlock, base));
    std::memcpy(out + done, static_cast<char*>(bounce_.data()) + (pos - base), take);
    done += take;
  }
}

void ParamSwap::write(size_t offset, size_t count, const void* src) {
  DS_CHECK(offset + count <= bytes_, "param swap write [{}, {}) past {}", offset, offset + count,
           bytes_);
  dropAll();
  const char* source = static_cast<const char*>(src);
  for (size_t done = 0; done < count;) {
    const size_t pos = offset + done, base = pos / kBlock * kBlock;
    const size_t take = std::min(count - done, base + kBlock - pos);
    if (take < kBlock) file_->wait(file_->readAsync(bounce_.data(), kBlock, base));
    std::memcpy(static_cast<char*>(bounce_.data()) + (pos - base), source + done, take);
    file_->wait(file_->writeAsync(bounce_.data(), kBlock, base));
    done += take;
  }
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
