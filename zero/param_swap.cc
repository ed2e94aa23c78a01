// ParamSwap: see param_swap.h.
#include "zero/param_swap.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "core/error.h"
#include "core/log.h"

namespace ds::zero {
namespace {
constexpr size_t kBlock = size_t(1) << 20;  // bounce size: a multiple of kIoAlign
}

ParamSwap::ParamSwap(const std::string& dir, int rank, size_t bytes, bool pin)
    : bytes_(bytes), bounce_(kBlock, pin), pin_(pin) {
  if (dir.empty()) throw ConfigError("offload_param.nvme_path: required when device is nvme");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (!std::filesystem::is_directory(dir))
    throw ConfigError("offload_param.nvme_path '" + dir + "': not a directory we can create");
  const size_t fileBytes = std::max(kBlock, (bytes + kBlock - 1) / kBlock * kBlock);
  file_ = std::make_unique<AsyncFile>(
      fmt::format("{}/zero_rank{}_pid{}_params.swp", dir, rank, ::getpid()), fileBytes);
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

void ParamSwap::read(size_t offset, size_t n, void* dst) {
  DS_CHECK(offset + n <= bytes_, "param swap read [{}, {}) past {}", offset, offset + n, bytes_);
  char* out = static_cast<char*>(dst);
  for (size_t done = 0; done < n;) {
    const size_t pos = offset + done, base = pos / kBlock * kBlock;
    const size_t take = std::min(n - done, base + kBlock - pos);
    file_->wait(file_->readAsync(bounce_.data(), kBlock, base));
    std::memcpy(out + done, static_cast<char*>(bounce_.data()) + (pos - base), take);
    done += take;
  }
}

void ParamSwap::write(size_t offset, size_t n, const void* src) {
  DS_CHECK(offset + n <= bytes_, "param swap write [{}, {}) past {}", offset, offset + n, bytes_);
  dropAll();
  const char* in = static_cast<const char*>(src);
  for (size_t done = 0; done < n;) {
    const size_t pos = offset + done, base = pos / kBlock * kBlock;
    const size_t take = std::min(n - done, base + kBlock - pos);
    if (take < kBlock) file_->wait(file_->readAsync(bounce_.data(), kBlock, base));
    std::memcpy(static_cast<char*>(bounce_.data()) + (pos - base), in + done, take);
    file_->wait(file_->writeAsync(bounce_.data(), kBlock, base));
    done += take;
  }
}

void ParamSwap::readAhead(uint64_t key, size_t offset, size_t n) {
  DS_CHECK(offset + n <= bytes_, "param swap read-ahead [{}, {}) past {}", offset, offset + n,
           bytes_);
  if (ahead_.count(key) || n == 0) return;
  const size_t base = offset / kIoAlign * kIoAlign;
  const size_t len = (offset + n - base + kIoAlign - 1) / kIoAlign * kIoAlign;
  AlignedBuffer b;
  auto it = spare_.find(len);
  if (it != spare_.end()) {
    b = std::move(it->second);
    spare_.erase(it);
  } else {
    b = AlignedBuffer(len, pin_);
    aheadBytes_ += len;
    peakAheadBytes_ = std::max(peakAheadBytes_, aheadBytes_);
  }
  const uint64_t t = file_->readAsync(b.data(), len, base);
  ahead_.emplace(key, Ahead{offset, n, base, std::move(b), t});
}

bool ParamSwap::take(uint64_t key, size_t offset, size_t n, void* dst) {
  auto it = ahead_.find(key);
  if (it == ahead_.end()) return false;
  Ahead a = std::move(it->second);
  ahead_.erase(it);
  file_->wait(a.ticket);
  const bool match = a.offset == offset && a.n == n;
  if (match) std::memcpy(dst, static_cast<char*>(a.buf.data()) + (offset - a.base), n);
  recycle(std::move(a.buf));
  return match;
}

bool ParamSwap::aheadCompleted(uint64_t key) {
  auto it = ahead_.find(key);
  return it != ahead_.end() && file_->completed(it->second.ticket);
}

void ParamSwap::dropAll() {
  for (auto& [key, a] : ahead_) {
    file_->wait(a.ticket);
    recycle(std::move(a.buf));
  }
  ahead_.clear();
}

// Keeps a staging buffer for the next read-ahead of the same size (a step reads the same
// parameters in the same order), so steady state allocates nothing.
void ParamSwap::recycle(AlignedBuffer b) {
  const size_t len = b.bytes();
  spare_.emplace(len, std::move(b));
}

}  // namespace ds::zero
