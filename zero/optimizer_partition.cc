// OptimizerPartition: see optimizer_partition.h.
#include "zero/optimizer_partition.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/log.h"

namespace ds::zero {
namespace {
constexpr size_t kTileQuantum = kIoAlign / sizeof(float);  // 1024 floats: O_DIRECT-aligned tiles
size_t roundUp(size_t x, size_t q) { return (x + q - 1) / q * q; }
}  // namespace

OptimizerPartition::OptimizerPartition(size_t n, const OptimizerOptions& opt,
                                       const OffloadOptions& offload, size_t subGroupSize,
                                       float* masterAlias, int rank)
    : n_(n), opt_(opt), off_(offload), alias_(masterAlias) {
  if (opt.type == "Adam" || opt.type == "AdamW") {
    names_ = {"fp32", "exp_avg", "exp_avg_sq"};
  } else if (opt.type == "SGD") {
    names_ = {"fp32"};
    if (opt.momentum != 0.f) names_.push_back("momentum");
  } else {
    throw ConfigError("optimizer.type '" + opt.type + "': expected Adam, AdamW or SGD");
  }
  if (off_.device != "none" && off_.device != "cpu" && off_.device != "nvme")
    throw ConfigError("offload_optimizer.device '" + off_.device +
                      "': expected none, cpu or nvme");
  if (off_.device == "nvme") {
    DS_CHECK(alias_ == nullptr, "nvme optimizer states cannot alias the model params");
    if (off_.nvmePath.empty())
      throw ConfigError("offload_optimizer.nvme_path: required when device is nvme");
    std::error_code ec;
    std::filesystem::create_directories(off_.nvmePath, ec);
    if (!std::filesystem::is_directory(off_.nvmePath))
      throw ConfigError("offload_optimizer.nvme_path '" + off_.nvmePath +
                        "': not a directory we can create");
    tile_ = roundUp(std::max<size_t>(1, std::min(subGroupSize, n)), kTileQuantum);
    slots_ = std::max(3, off_.bufferCount);
    size_t fileBytes = roundUp(std::max<size_t>(n, 1), tile_) * sizeof(float);
    for (size_t s = 0; s < names_.size(); ++s) {
      std::string path = fmt::format("{}/zero_rank{}_pid{}_{}.swp", off_.nvmePath, rank,
                                     ::getpid(), names_[s]);
      files_.push_back(std::make_unique<AsyncFile>(path, fileBytes));
    }
    for (int k = 0; k < slots_ * int(names_.size()); ++k)
      slotBuf_.emplace_back(tile_ * sizeof(float), off_.pinMemory);
    DS_LOG_DEBUG("zero", "nvme optimizer swap: {} states x {} elems, tile {}, {} slots, {}{}",
                 names_.size(), n, tile_, slots_, files_[0]->direct() ? "O_DIRECT" : "buffered",
                 files_[0]->usingUring() ? ", io_uring" : ", pread thread");
  } else {
    mem_.resize(names_.size());
    for (size_t s = 0; s < names_.size(); ++s)
      if (s != 0 || alias_ == nullptr) mem_[s].assign(n, 0.f);
  }
}

OptimizerPartition::~OptimizerPartition() = default;

MemPlace OptimizerPartition::place() const {
  return off_.device == "nvme" ? MemPlace::kNvme
       : off_.device == "cpu"  ? MemPlace::kHost
                               : MemPlace::kDevice;
}

size_t OptimizerPartition::stateBytes() const {
  size_t states = names_.size() - (alias_ ? 1 : 0);
  return states * n_ * sizeof(float);
}

size_t OptimizerPartition::bufferBytes() const {
  size_t b = 0;
  for (const auto& s : slotBuf_) b += s.bytes();
  return b;
}

void OptimizerPartition::read(size_t state, size_t off, size_t count, float* out) {
  DS_CHECK(state < names_.size() && off + count <= n_);
  if (files_.empty()) {
    const float* src = state == 0 && alias_ ? alias_ : mem_[state].data();
    std::memcpy(out, src + off, count * sizeof(float));
    return;
  }
  float* bounce = static_cast<float*>(slotBuf_[0].data());
  for (size_t done = 0; done < count;) {
    size_t pos = off + done, base = pos / tile_ * tile_;
    size_t take = std::min(count - done, base + tile_ - pos);
    files_[state]->wait(files_[state]->readAsync(bounce, tile_ * sizeof(float),
                                                 base * sizeof(float)));
    std::memcpy(out + done, bounce + (pos - base), take * sizeof(float));
    done += take;
  }
}

void OptimizerPartition::write(size_t state, size_t off, size_t count, const float* in) {
  DS_CHECK(state < names_.size() && off + count <= n_);
  if (files_.empty()) {
    float* dst = state == 0 && alias_ ? alias_ : mem_[state].data();
    std::memcpy(dst + off, in, count * sizeof(float));
    return;
  }
  float* bounce = static_cast<float*>(slotBuf_[0].data());
  for (size_t done = 0; done < count;) {
    size_t pos = off + done, base = pos / tile_ * tile_;
    size_t take = std::min(count - done, base + tile_ - pos);
    auto& f = *files_[state];
    f.wait(f.readAsync(bounce, tile_ * sizeof(float), base * sizeof(float)));
    std::memcpy(bounce + (pos - base), in + done, take * sizeof(float));
    f.wait(f.writeAsync(bounce, tile_ * sizeof(float), base * sizeof(float)));
    done += take;
  }
}

void OptimizerPartition::stepTile(float* const* st, const float* grad, size_t cnt,
                                  float gradScale, float lr, int64_t step, Half16Out out16) {
  if (names_.size() == 3) {
    AdamConfig c{lr, opt_.beta1, opt_.beta2, opt_.eps, opt_.weightDecay,
                 opt_.type == "AdamW" ? true : opt_.adamwMode, opt_.biasCorrection};
    adamStep(bestIsa(), c, step, gradScale, st[0], grad, st[1], st[2], cnt, out16);
  } else {
    SgdConfig c{lr, opt_.momentum, opt_.weightDecay};
    sgdStep(bestIsa(), c, gradScale, st[0], grad, names_.size() > 1 ? st[1] : nullptr, cnt,
            out16);
  }
}

void OptimizerPartition::update(
    const float* grad, size_t count, float gradScale, float lr, int64_t step, Half16Out out16,
    const std::function<void(size_t, size_t, const float*)>& afterTile) {
  DS_CHECK(count <= n_);
  if (!files_.empty()) return updateNvme(grad, count, gradScale, lr, step, out16, afterTile);
  float* st[3] = {};
  for (size_t s = 0; s < names_.size(); ++s)
    st[s] = s == 0 && alias_ ? alias_ : mem_[s].data();
  stepTile(st, grad, count, gradScale, lr, step, out16);
  if (afterTile) afterTile(0, count, st[0]);
}

void OptimizerPartition::updateNvme(
    const float* grad, size_t count, float gradScale, float lr, int64_t step, Half16Out out16,
    const std::function<void(size_t, size_t, const float*)>& afterTile) {
  using K = IoEvent::Kind;
  const size_t ns = names_.size(), tiles = (count + tile_ - 1) / tile_;
  const size_t slots = size_t(slots_), look = slots - 2;  // tiles read ahead; 1 writing, 1 computing
  readT_.assign(slots * ns, 0);
  writeT_.assign(slots * ns, 0);
  readTile_.assign(slots, 0);
  writeTile_.assign(slots, 0);
  auto buf = [&](size_t slot, size_t s) { return static_cast<float*>(slotBuf_[slot * ns + s].data()); };
  auto bytesOf = [&](size_t k) {
    return roundUp(std::min(tile_, count - k * tile_), kTileQuantum) * sizeof(float);
  };
  auto waitSlot = [&](std::vector<uint64_t>& t, size_t slot, K kind, size_t tile) {
    if (!t[slot * ns]) return;
    note(kind, tile, tracing_ && slotDone(t, slot));
    for (size_t s = 0; s < ns; ++s) files_[s]->wait(t[slot * ns + s]);
    std::fill(t.begin() + long(slot * ns), t.begin() + long((slot + 1) * ns), 0);
  };
  auto startRead = [&](size_t k) {
    const size_t slot = k % slots;
    waitSlot(writeT_, slot, K::kWriteWaited, writeTile_[slot]);  // the slot's write-back first
    for (size_t s = 0; s < ns; ++s)
      readT_[slot * ns + s] = files_[s]->readAsync(buf(slot, s), bytesOf(k), k * tile_ * 4);
    readTile_[slot] = k;
    note(K::kReadIssued, k);
  };
  for (size_t k = 0; k < std::min(tiles, look); ++k) startRead(k);
  for (size_t k = 0; k < tiles; ++k) {
    const size_t slot = k % slots, off = k * tile_, cnt = std::min(tile_, count - off);
    waitSlot(readT_, slot, K::kReadWaited, k);
    if (k + look < tiles) startRead(k + look);
    float* st[3] = {};
    for (size_t s = 0; s < ns; ++s) st[s] = buf(slot, s);
    Half16Out o = out16;
    if (o.data) o.data += off;
    stepTile(st, grad + off, cnt, gradScale, lr, step, o);
    note(K::kUpdated, k);
    if (afterTile) afterTile(off, cnt, st[0]);
    for (size_t s = 0; s < ns; ++s)
      writeT_[slot * ns + s] = files_[s]->writeAsync(buf(slot, s), bytesOf(k), off * 4);
    writeTile_[slot] = k;
    note(K::kWriteIssued, k);
  }
  for (size_t k = tiles > slots ? tiles - slots : 0; k < tiles; ++k)
    waitSlot(writeT_, k % slots, K::kWriteWaited, k);
  for (auto& f : files_) f->waitAll();
}

bool OptimizerPartition::slotDone(const std::vector<uint64_t>& tickets, size_t slot) {
  const size_t ns = names_.size();
  for (size_t s = 0; s < ns; ++s)
    if (tickets[slot * ns + s] && !files_[s]->completed(tickets[slot * ns + s])) return false;
  return true;
}

std::vector<OptimizerPartition::IoEvent> OptimizerPartition::takeTrace() {
  std::vector<IoEvent> t;
  t.swap(trace_);
  return t;
}

std::vector<OptimizerPartition::IoInFlight> OptimizerPartition::inFlight() {
  std::vector<IoInFlight> v;
  const size_t ns = names_.size();
  for (size_t slot = 0; slot < readTile_.size(); ++slot) {
    if (readT_[slot * ns]) v.push_back({readTile_[slot], false, slotDone(readT_, slot)});
    if (writeT_[slot * ns]) v.push_back({writeTile_[slot], true, slotDone(writeT_, slot)});
  }
  return v;
}

}  // namespace ds::zero
