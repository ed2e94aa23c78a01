// OptimizerPartition: see optimizer_partition.h.
#include "zero/optimizer_partition.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/log.h"
#include "zero/cpu_lamb.h"
#include "zero/swap_space.h"

namespace ds::zero {
namespace {
constexpr size_t kTileQuantum = kIoAlign / sizeof(float);  // 1024 floats: O_DIRECT-aligned tiles
// The largest NVMe tile (elements per state file per slot): 8 MiB requests already run a disk at
// its sequential rate and the pipeline keeps buffer_count of them per state in flight, so a larger
// sub_group_size (DeepSpeed's default is 1e9) would only buy host memory: slots x states x tile.
constexpr size_t kMaxNvmeTile = size_t(2) << 20;
size_t roundUp(size_t value, size_t quantum) { return (value + quantum - 1) / quantum * quantum; }

std::vector<std::string> stateNamesOf(const OptimizerOptions& opt) {
  if (opt.type == "Adam" || opt.type == "AdamW" || opt.type == "Lamb")
    return {"fp32", "exp_avg", "exp_avg_sq"};
  if (opt.type != "SGD")
    throw ConfigError("optimizer.type '" + opt.type + "': expected Adam, AdamW, Lamb or SGD");
  std::vector<std::string> names{"fp32"};
  if (opt.momentum != 0.f) names.push_back("momentum");
  return names;
}

}  // namespace

size_t nvmeTileElems(size_t subGroupSize, size_t count) {
  return roundUp(std::max<size_t>(1, std::min({subGroupSize, count, kMaxNvmeTile})), kTileQuantum);
}

namespace {}  // namespace

OptimizerPartition::OptimizerPartition(size_t count, const OptimizerOptions& opt,
                                       const OffloadOptions& offload, size_t subGroupSize,
                                       float* masterAlias, int rank)
    : size_(count),
      opt_(opt),
      offload_(offload),
      names_(stateNamesOf(opt)),
      alias_(masterAlias),
      subGroup_(std::max<size_t>(subGroupSize, 1)),
      memTile_(subGroup_) {
  if (offload_.device != "none" && offload_.device != "cpu" && offload_.device != "nvme")
    throw ConfigError("offload_optimizer.device '" + offload_.device +
                      "': expected none, cpu or nvme");
  if (offload_.device == "nvme") {
    openSwap(subGroupSize, rank);
    return;
  }
  mem_.resize(names_.size());
  for (size_t state = 0; state < names_.size(); ++state)
    if (state != 0 || alias_ == nullptr) mem_[state].assign(count, 0.f);
}

void OptimizerPartition::openSwap(size_t subGroupSize, int rank) {
  DS_CHECK(alias_ == nullptr, "nvme optimizer states cannot alias the model params");
  tile_ = nvmeTileElems(subGroupSize, size_);
  slots_ = std::max(3, offload_.bufferCount);
  const size_t fileBytes = roundUp(std::max<size_t>(size_, 1), tile_) * sizeof(float);
  checkSwapSpace("offload_optimizer.nvme_path", offload_.nvmePath, fileBytes * names_.size());
  for (const auto& name : names_) {
    std::string path =
        fmt::format("{}/zero_rank{}_pid{}_{}.swp", offload_.nvmePath, rank, ::getpid(), name);
    files_.push_back(std::make_unique<AsyncFile>(path, fileBytes, asyncFileOptions(offload_.aio)));
  }
  for (int k = 0; k < slots_ * int(names_.size()); ++k)
    slotBuf_.emplace_back(tile_ * sizeof(float), offload_.pinMemory);
  DS_LOG_DEBUG("zero", "nvme optimizer swap: {} states x {} elems, tile {}, {} slots, {}{}",
               names_.size(), size_, tile_, slots_, files_[0]->direct() ? "O_DIRECT" : "buffered",
               files_[0]->usingUring() ? ", io_uring" : ", pread thread");
}

OptimizerPartition::~OptimizerPartition() = default;

MemPlace OptimizerPartition::place() const {
  return offload_.device == "nvme"  ? MemPlace::kNvme
         : offload_.device == "cpu" ? MemPlace::kHost
                                    : MemPlace::kDevice;
}

size_t OptimizerPartition::stateBytes() const {
  size_t states = names_.size() - (alias_ ? 1 : 0);
  return states * size_ * sizeof(float);
}

size_t OptimizerPartition::bufferBytes() const {
  size_t total = 0;
  for (const auto& buffer : slotBuf_) total += buffer.bytes();
  return total;
}

float* OptimizerPartition::stateData(size_t state) {
  DS_CHECK(state < names_.size() && files_.empty(), "state {} of an nvme optimizer", state);
  return state == 0 && alias_ ? alias_ : mem_[state].data();
}

void OptimizerPartition::read(size_t state, size_t offset, size_t count, float* out) {
  DS_CHECK(state < names_.size() && offset + count <= size_);
  if (files_.empty()) {
    const float* src = state == 0 && alias_ ? alias_ : mem_[state].data();
    std::memcpy(out, src + offset, count * sizeof(float));
    return;
  }
  float* bounce = static_cast<float*>(slotBuf_[0].data());
  for (size_t done = 0; done < count;) {
    size_t pos = offset + done, base = pos / tile_ * tile_;
    size_t take = std::min(count - done, base + tile_ - pos);
    files_[state]->wait(
        files_[state]->readAsync(bounce, tile_ * sizeof(float), base * sizeof(float)));
    std::memcpy(out + done, bounce + (pos - base), take * sizeof(float));
    done += take;
  }
}

void OptimizerPartition::write(size_t state, size_t offset, size_t count, const float* values) {
  DS_CHECK(state < names_.size() && offset + count <= size_);
  if (files_.empty()) {
    float* dst = state == 0 && alias_ ? alias_ : mem_[state].data();
    std::memcpy(dst + offset, values, count * sizeof(float));
    return;
  }
  float* bounce = static_cast<float*>(slotBuf_[0].data());
  for (size_t done = 0; done < count;) {
    size_t pos = offset + done, base = pos / tile_ * tile_;
    size_t take = std::min(count - done, base + tile_ - pos);
    auto& file = *files_[state];
    file.wait(file.readAsync(bounce, tile_ * sizeof(float), base * sizeof(float)));
    std::memcpy(bounce + (pos - base), values + done, take * sizeof(float));
    file.wait(file.writeAsync(bounce, tile_ * sizeof(float), base * sizeof(float)));
    done += take;
  }
}

void OptimizerPartition::setDecayRuns(std::vector<Run> runs) {
  for (size_t k = 0; k < runs.size(); ++k)
    DS_CHECK(runs[k].begin < runs[k].end && runs[k].end <= size_ &&
                 (k == 0 || runs[k - 1].end <= runs[k].begin),
             "decay run {} [{}, {}) of a partition of {}", k, runs[k].begin, runs[k].end, size_);
  decayRuns_ = std::move(runs);
  decayAll_ = false;
}

void OptimizerPartition::stepRun(float* const* states, const float* grad, size_t cnt,
                                 float gradScale, float learningRate, int64_t step, Half16Out out16,
                                 bool decay) {
  const float weightDecay = decay ? opt_.weightDecay : 0.f;
  if (names_.size() == 3) {
    AdamConfig config{learningRate,       opt_.beta1,  opt_.beta2,
                      opt_.eps,           weightDecay, opt_.type == "AdamW" ? true : opt_.adamwMode,
                      opt_.biasCorrection};
    adamStep(bestIsa(), config, step, gradScale, states[0], grad, states[1], states[2], cnt, out16);
  } else {
    SgdConfig config{learningRate, opt_.momentum, weightDecay};
    sgdStep(bestIsa(), config, gradScale, states[0], grad, names_.size() > 1 ? states[1] : nullptr,
            cnt, out16);
  }
}

// Lamb: one trust ratio per parameter, so one lambStep per segment (stage 0: the partition is
// every parameter whole, in memory).
void OptimizerPartition::stepLamb(float* const* states, const float* grad, size_t first, size_t cnt,
                                  float gradScale, float learningRate, int64_t step,
                                  Half16Out out16) {
  DS_CHECK(!segments_.empty() && files_.empty() && first == 0,
           "Lamb needs its parameters' extents in memory");
  for (const auto& segment : segments_) {
    DS_CHECK(segment.offset + segment.size <= cnt, "Lamb parameter extent past the partition");
    LambConfig config{learningRate,
                      opt_.beta1,
                      opt_.beta2,
                      opt_.eps,
                      segment.decay ? opt_.weightDecay : 0.f,
                      opt_.maxCoeff,
                      opt_.minCoeff,
                      opt_.biasCorrection,
                      opt_.epsInsideSqrt};
    Half16Out part = out16;
    if (part.data) part.data += segment.offset;
    const size_t off = segment.offset;
    lambStep(config, step, gradScale, states[0] + off, grad + off, states[1] + off, states[2] + off,
             segment.size, part);
  }
}

void OptimizerPartition::stepTile(float* const* states, const float* grad, size_t first, size_t cnt,
                                  float gradScale, float learningRate, int64_t step,
                                  Half16Out out16) {
  if (opt_.type == "Lamb")
    return stepLamb(states, grad, first, cnt, gradScale, learningRate, step, out16);
  if (decayAll_ || opt_.weightDecay == 0.f)
    return stepRun(states, grad, cnt, gradScale, learningRate, step, out16, true);
  const size_t end = first + cnt;
  auto run = std::upper_bound(decayRuns_.begin(), decayRuns_.end(), first,
                              [](size_t pos, const Run& item) { return pos < item.end; });
  for (size_t pos = first; pos < end;) {
    const bool inRun = run != decayRuns_.end() && run->begin <= pos;
    const size_t next = inRun                                         ? std::min(run->end, end)
                        : run != decayRuns_.end() && run->begin < end ? run->begin
                                                                      : end;
    const size_t rel = pos - first;
    float* shifted[3] = {};
    for (size_t state = 0; state < names_.size(); ++state) shifted[state] = states[state] + rel;
    Half16Out part = out16;
    if (part.data) part.data += rel;
    stepRun(shifted, grad + rel, next - pos, gradScale, learningRate, step, part, inRun);
    if (inRun && next == run->end) ++run;
    pos = next;
  }
}

void OptimizerPartition::setUpdateTile(size_t elems) {
  DS_CHECK(elems >= 1, "optimizer update tile of 0 elements");
  memTile_ = std::min(elems, subGroup_);
}

void OptimizerPartition::update(
    const float* grad, size_t count, float gradScale, float learningRate, int64_t step,
    Half16Out out16, const std::function<void(size_t, size_t, const float*)>& afterTile) {
  DS_CHECK(count <= size_);
  if (!files_.empty())
    return updateNvme(grad, count, gradScale, learningRate, step, out16, afterTile);
  updateMemory(grad, count, gradScale, learningRate, step, out16, afterTile);
}

// In memory: tile after tile, each tile's states, gradients and 16-bit copy shifted to its start
// (stepTile looks the decay runs up by the tile's local offset).
void OptimizerPartition::updateMemory(
    const float* grad, size_t count, float gradScale, float learningRate, int64_t step,
    Half16Out out16, const std::function<void(size_t, size_t, const float*)>& afterTile) {
  float* base[3] = {};
  for (size_t state = 0; state < names_.size(); ++state)
    base[state] = state == 0 && alias_ ? alias_ : mem_[state].data();
  const size_t tile = opt_.type == "Lamb" ? std::max<size_t>(count, 1) : memTile_;
  for (size_t off = 0; off < count; off += tile) {
    const size_t cnt = std::min(tile, count - off);
    float* states[3] = {};
    for (size_t state = 0; state < names_.size(); ++state) states[state] = base[state] + off;
    Half16Out tileOut = out16;
    if (tileOut.data) tileOut.data += off;
    stepTile(states, grad + off, off, cnt, gradScale, learningRate, step, tileOut);
    if (afterTile) afterTile(off, cnt, states[0]);
  }
}

void OptimizerPartition::updateNvme(
    const float* grad, size_t count, float gradScale, float learningRate, int64_t step,
    Half16Out out16, const std::function<void(size_t, size_t, const float*)>& afterTile) {
  using Kind = IoEvent::Kind;
  const size_t numStates = names_.size(), tiles = (count + tile_ - 1) / tile_;
  const size_t slots = size_t(slots_),
               look = slots - 2;  // tiles read ahead; 1 writing, 1 computing
  readT_.assign(slots * numStates, 0);
  writeT_.assign(slots * numStates, 0);
  readTile_.assign(slots, 0);
  writeTile_.assign(slots, 0);
  auto buf = [&](size_t slot, size_t state) {
    return static_cast<float*>(slotBuf_[slot * numStates + state].data());
  };
  auto bytesOf = [&](size_t tile) {
    return roundUp(std::min(tile_, count - tile * tile_), kTileQuantum) * sizeof(float);
  };
  auto waitSlot = [&](std::vector<uint64_t>& tickets, size_t slot, Kind kind, size_t tile) {
    if (!tickets[slot * numStates]) return;
    note(kind, tile, tracing_ && slotDone(tickets, slot));
    for (size_t state = 0; state < numStates; ++state)
      files_[state]->wait(tickets[slot * numStates + state]);
    std::fill(tickets.begin() + long(slot * numStates),
              tickets.begin() + long((slot + 1) * numStates), 0);
  };
  auto startRead = [&](size_t tile) {
    const size_t slot = tile % slots;
    waitSlot(writeT_, slot, Kind::kWriteWaited, writeTile_[slot]);  // the slot's write-back first
    for (size_t state = 0; state < numStates; ++state)
      readT_[slot * numStates + state] =
          files_[state]->readAsync(buf(slot, state), bytesOf(tile), tile * tile_ * 4);
    readTile_[slot] = tile;
    note(Kind::kReadIssued, tile);
  };
  for (size_t k = 0; k < std::min(tiles, look); ++k) startRead(k);
  for (size_t k = 0; k < tiles; ++k) {
    const size_t slot = k % slots, off = k * tile_, cnt = std::min(tile_, count - off);
    waitSlot(readT_, slot, Kind::kReadWaited, k);
    if (k + look < tiles) startRead(k + look);
    float* states[3] = {};
    for (size_t state = 0; state < numStates; ++state) states[state] = buf(slot, state);
    Half16Out tileOut = out16;
    if (tileOut.data) tileOut.data += off;
    stepTile(states, grad + off, off, cnt, gradScale, learningRate, step, tileOut);
    note(Kind::kUpdated, k);
    if (afterTile) afterTile(off, cnt, states[0]);
    for (size_t state = 0; state < numStates; ++state)
      writeT_[slot * numStates + state] =
          files_[state]->writeAsync(buf(slot, state), bytesOf(k), off * 4);
    writeTile_[slot] = k;
    note(Kind::kWriteIssued, k);
  }
  for (size_t k = tiles > slots ? tiles - slots : 0; k < tiles; ++k)
    waitSlot(writeT_, k % slots, Kind::kWriteWaited, k);
  for (auto& file : files_) file->waitAll();
}

bool OptimizerPartition::slotDone(const std::vector<uint64_t>& tickets, size_t slot) {
  const size_t numStates = names_.size();
  for (size_t state = 0; state < numStates; ++state)
    if (tickets[slot * numStates + state] &&
        !files_[state]->completed(tickets[slot * numStates + state]))
      return false;
  return true;
}

std::vector<OptimizerPartition::IoEvent> OptimizerPartition::takeTrace() {
  std::vector<IoEvent> taken;
  taken.swap(trace_);
  return taken;
}

std::vector<OptimizerPartition::IoInFlight> OptimizerPartition::inFlight() {
  std::vector<IoInFlight> flights;
  const size_t numStates = names_.size();
  for (size_t slot = 0; slot < readTile_.size(); ++slot) {
    if (readT_[slot * numStates])
      flights.push_back({readTile_[slot], false, slotDone(readT_, slot)});
    if (writeT_[slot * numStates])
      flights.push_back({writeTile_[slot], true, slotDone(writeT_, slot)});
  }
  return flights;
}

}  // namespace ds::zero
