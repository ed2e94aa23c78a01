// CompressedAllreduce: see compressed_allreduce.h.
#include "comm/compressed_allreduce.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>

#if defined(__SSE2__)
#include <emmintrin.h>
#include <xmmintrin.h>
#endif

#include "comm/process_group.h"
#include "core/error.h"

namespace ds::comm {
namespace {

constexpr int kTagWorker = 0x1B01;  // phase 1: worker chunks to their server
constexpr int kTagServer = 0x1B02;  // phase 2: server chunks to everyone

size_t paddedCountFor(size_t count, int world) {
  const size_t w = size_t(world);
  const size_t quantum = w * (w * 8 / std::gcd(w, size_t(8)));  // world * lcm(world, 8)
  return (count + quantum - 1) / quantum * quantum;
}

// Byte b of the packed signs as eight 32-bit masks, element k first: 0 where bit 7-k is set (a
// non-negative value: +scale) and the float sign bit where it is clear (-scale). XOR with the
// scale's bits gives exactly scale or -scale, so the unpack loops have no branch or shift per
// element and vectorize (SSE2, x86-64's baseline).
struct SignMasks {
  uint32_t mask[256][8];
  SignMasks() {
    for (unsigned byte = 0; byte < 256; ++byte)
      for (unsigned k = 0; k < 8; ++k) mask[byte][k] = (byte >> (7 - k)) & 1u ? 0u : 0x80000000u;
  }
};
const SignMasks kSignMasks;

// Bit k of `lanes` (element k) moved to bit 7-k: the packed format is MSB first.
struct BitReverse {
  uint8_t table[256];
  BitReverse() {
    for (unsigned byte = 0; byte < 256; ++byte) {
      unsigned reversed = 0;
      for (unsigned bit = 0; bit < 8; ++bit) reversed |= ((byte >> bit) & 1u) << (7 - bit);
      table[byte] = uint8_t(reversed);
    }
  }
};
const BitReverse kBitReverse;

// Eight values' signs (value >= 0, so NaN packs as negative and -0 as non-negative) as one byte,
// MSB first.
inline uint8_t signByte(const float* values) {
#if defined(__SSE2__)
  const __m128 zero = _mm_setzero_ps();
  const int low = _mm_movemask_ps(_mm_cmpge_ps(_mm_loadu_ps(values), zero));
  const int high = _mm_movemask_ps(_mm_cmpge_ps(_mm_loadu_ps(values + 4), zero));
  return kBitReverse.table[unsigned(low | (high << 4))];
#else
  unsigned packed = 0;
  for (size_t bit = 0; bit < 8; ++bit) packed = (packed << 1) | (values[bit] >= 0.f);
  return uint8_t(packed);
#endif
}

inline float flipped(uint32_t scaleBits, uint32_t mask) {
  const uint32_t bits = scaleBits ^ mask;
  float value;
  std::memcpy(&value, &bits, 4);
  return value;
}

}  // namespace

void packSigns(const float* values, size_t n, uint8_t* bits) {
  DS_CHECK(n % 8 == 0, "packSigns of {} values (needs a multiple of 8)", n);
  for (size_t byte = 0; byte < n / 8; ++byte) bits[byte] = signByte(values + byte * 8);
}

namespace {

// out[i] = (or +=, when Add) +-scale by bit i, MSB first.
template <bool Add>
void unpackInto(const uint8_t* bits, size_t n, float scale, float* out) {
  uint32_t scaleBits;
  std::memcpy(&scaleBits, &scale, 4);
  const size_t whole = n / 8;
  for (size_t byte = 0; byte < whole; ++byte) {
    const uint32_t* mask = kSignMasks.mask[bits[byte]];
    float* dst = out + byte * 8;
    for (size_t k = 0; k < 8; ++k) {
      if constexpr (Add) dst[k] += flipped(scaleBits, mask[k]);
      else dst[k] = flipped(scaleBits, mask[k]);
    }
  }
  for (size_t i = whole * 8; i < n; ++i) {
    const float value = (bits[i / 8] >> (7 - i % 8)) & 1u ? scale : -scale;
    if constexpr (Add) out[i] += value;
    else out[i] = value;
  }
}

}  // namespace

void unpackSigns(const uint8_t* bits, size_t n, float scale, float* out) {
  unpackInto<false>(bits, n, scale, out);
}

void unpackSignsAdd(const uint8_t* bits, size_t n, float scale, float* out) {
  unpackInto<true>(bits, n, scale, out);
}

float compressWithFeedback(float* x, float* error, size_t n, uint8_t* bits) {
  DS_CHECK(n % 8 == 0, "compressWithFeedback of {} values (needs a multiple of 8)", n);
  double sumSquares = 0;
#pragma omp simd reduction(+ : sumSquares)
  for (size_t i = 0; i < n; ++i) {
    x[i] += error[i];
    sumSquares += double(x[i]) * double(x[i]);
  }
  const float scale = n ? float(std::sqrt(sumSquares / double(n))) : 0.f;
  uint32_t scaleBits;
  std::memcpy(&scaleBits, &scale, 4);
  // One pass: the signs packed, and what the decoded value (+-scale) drops kept as the error.
  for (size_t byte = 0; byte < n / 8; ++byte) {
    const uint8_t packed = signByte(x + byte * 8);
    bits[byte] = packed;
    const uint32_t* mask = kSignMasks.mask[packed];
    for (size_t k = 0; k < 8; ++k)
      error[byte * 8 + k] = x[byte * 8 + k] - flipped(scaleBits, mask[k]);
  }
  return scale;
}

CompressedAllreduce::CompressedAllreduce(ProcessGroup* group, std::vector<size_t> segments)
    : group_(group) {
  if (group_ && group_->size() > 1) {
    rank_ = group_->rank();
    world_ = group_->size();
  }
  for (size_t size : segments) {
    Segment seg;
    seg.offset = count_;
    seg.size = size;
    seg.paddedOffset = padded_;
    seg.padded = world_ == 1 ? size : paddedCountFor(size, world_);
    seg.chunk = seg.padded / size_t(world_);
    seg.chunkOffset = chunk_;
    seg.byteOffset = chunk_ / 8;
    count_ += size;
    padded_ += seg.padded;
    chunk_ += seg.chunk;
    segments_.push_back(seg);
  }
  if (world_ == 1) return;
  messageBytes_ = chunk_ / 8 + 4 * segments_.size();
  workerError_.assign(padded_, 0.f);
  serverError_.assign(chunk_, 0.f);
  sendBuf_.assign(size_t(world_) * messageBytes_, 0);
  recvBuf_.assign(size_t(world_) * messageBytes_, 0);
  for (size_t s = 0; s < segments_.size(); ++s)
    for (size_t begin = 0; begin < segments_[s].chunk; begin += kBlockElems)
      blocks_.push_back({s, begin, std::min(segments_[s].chunk, begin + kBlockElems)});
  partial_.assign(blocks_.size() * size_t(world_), 0.0);
}

void CompressedAllreduce::resetErrors() {
  std::fill(workerError_.begin(), workerError_.end(), 0.f);
  std::fill(serverError_.begin(), serverError_.end(), 0.f);
}

uint64_t CompressedAllreduce::bytesPerCall() const {
  return world_ == 1 ? 0 : 2 * uint64_t(world_ - 1) * messageBytes_;
}

uint64_t CompressedAllreduce::plainAllreduceBytes(size_t count, int world) {
  return world <= 1 ? 0 : 2 * uint64_t(world - 1) * uint64_t(count) * 4 / uint64_t(world);
}

// The scales sit after the signs, at any byte offset: copied, never dereferenced as float.
float CompressedAllreduce::scaleAt(const std::vector<uint8_t>& buf, size_t peer,
                                   size_t segment) const {
  float scale;
  std::memcpy(&scale, buf.data() + peer * messageBytes_ + chunk_ / 8 + 4 * segment, 4);
  return scale;
}

void CompressedAllreduce::setScale(std::vector<uint8_t>& buf, size_t peer, size_t segment,
                                   float scale) const {
  std::memcpy(buf.data() + peer * messageBytes_ + chunk_ / 8 + 4 * segment, &scale, 4);
}

// Messages are slots of messageBytes_. perPeerChunk: slot j of `out` goes to rank j (phase 1);
// else slot 0 goes to every peer (phase 2). Slot i of `in` receives rank i's message; this rank's
// own slot is copied locally.
void CompressedAllreduce::exchange(const std::vector<uint8_t>& out, std::vector<uint8_t>& in,
                                   bool perPeerChunk, int tag) {
  const size_t slot = messageBytes_, me = size_t(rank_);
  std::vector<WorkPtr> works;
  for (size_t peer = 0; peer < size_t(world_); ++peer) {
    if (peer == me) continue;
    const uint8_t* msg = out.data() + (perPeerChunk ? peer * slot : 0);
    works.push_back(
        group_->send({const_cast<uint8_t*>(msg), slot, DType::kU8, Device::kCpu}, int(peer), tag));
    bytesSent_ += slot;
  }
  for (size_t peer = 0; peer < size_t(world_); ++peer)
    if (peer != me)
      works.push_back(
          group_->recv({in.data() + peer * slot, slot, DType::kU8, Device::kCpu}, int(peer), tag));
  std::memcpy(in.data() + me * slot, out.data() + (perPeerChunk ? me * slot : 0), slot);
  for (auto& work : works) work->wait();
}

std::pair<size_t, size_t> CompressedAllreduce::callerRange(const Block& block, size_t peer) const {
  const Segment& seg = segments_[block.segment];
  const size_t first = peer * seg.chunk + block.begin, last = peer * seg.chunk + block.end;
  if (first >= seg.size) return {0, 0};
  return {seg.offset + first, seg.offset + std::min(last, seg.size)};
}

namespace {

// x[k] for the eight elements of byte `byte` of a block: the caller's value (0 past its end)
// plus the error.
inline void compensated(const float* values, size_t valid, const float* error, float* out) {
  if (valid == 8) {
    for (size_t k = 0; k < 8; ++k) out[k] = values[k] + error[k];
    return;
  }
  for (size_t k = 0; k < 8; ++k) out[k] = (k < valid ? values[k] : 0.f) + error[k];
}

// The eight lane sums added in a fixed order.
inline double laneSum(const double* lanes) {
  return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
         ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
}

// The sign byte of x and the new error x - (+-scale), elementwise (vectorizes).
inline uint8_t packWithError(const float* x, float scale, float* error) {
  for (size_t k = 0; k < 8; ++k) error[k] = x[k] - (x[k] >= 0.f ? scale : -scale);
  return signByte(x);
}

}  // namespace

// Phase 1 on this rank: pass A (the hooks' before, then the sums of squares of buf + error per
// block), the scales, pass B (the signs straight into each peer's message, the new error).
void CompressedAllreduce::compressWorker(float* buf, const Hooks& hooks) {
  const size_t world = size_t(world_), items = blocks_.size() * world;
#pragma omp parallel for schedule(dynamic, 1)
  for (long item = 0; item < long(items); ++item) {
    const Block& block = blocks_[size_t(item) / world];
    const size_t peer = size_t(item) % world;
    const Segment& seg = segments_[block.segment];
    const auto [from, to] = callerRange(block, peer);
    if (hooks.before && from < to) hooks.before(from, to);
    const size_t first = peer * seg.chunk + block.begin;
    const float* error = workerError_.data() + seg.paddedOffset + first;
    double lanes[8] = {};  // one sum per lane: no serial dependency, vectorizes
    for (size_t i = 0; i < block.end - block.begin; i += 8) {
      float x[8];
      const size_t at = first + i, valid = at < seg.size ? std::min<size_t>(8, seg.size - at) : 0;
      compensated(buf + seg.offset + (valid ? at : 0), valid, error + i, x);
      for (size_t k = 0; k < 8; ++k) lanes[k] += double(x[k]) * double(x[k]);
    }
    partial_[size_t(item)] = laneSum(lanes);
  }
  std::vector<float> scales(segments_.size(), 0.f);
  std::vector<double> sums(segments_.size(), 0.0);
  for (size_t b = 0; b < blocks_.size(); ++b)
    for (size_t peer = 0; peer < world; ++peer)
      sums[blocks_[b].segment] += partial_[b * world + peer];
  for (size_t s = 0; s < segments_.size(); ++s) {
    if (segments_[s].padded) scales[s] = float(std::sqrt(sums[s] / double(segments_[s].padded)));
    for (size_t peer = 0; peer < world; ++peer) setScale(sendBuf_, peer, s, scales[s]);
  }
#pragma omp parallel for schedule(dynamic, 1)
  for (long item = 0; item < long(items); ++item) {
    const Block& block = blocks_[size_t(item) / world];
    const size_t peer = size_t(item) % world;
    const Segment& seg = segments_[block.segment];
    const size_t first = peer * seg.chunk + block.begin;
    float* error = workerError_.data() + seg.paddedOffset + first;
    uint8_t* bits = sendBuf_.data() + peer * messageBytes_ + seg.byteOffset + block.begin / 8;
    const float scale = scales[block.segment];
    for (size_t i = 0; i < block.end - block.begin; i += 8) {
      float x[8];
      const size_t at = first + i, valid = at < seg.size ? std::min<size_t>(8, seg.size - at) : 0;
      compensated(buf + seg.offset + (valid ? at : 0), valid, error + i, x);
      bits[i / 8] = packWithError(x, scale, error + i);
    }
  }
}

// Server: this rank's chunk of every tensor is the average of the workers' estimates (in rank
// order) plus the server error, compressed again; computed twice from the received bits (for
// the scale, then for the signs) rather than stored.
void CompressedAllreduce::compressServer() {
  const size_t world = size_t(world_);
  std::vector<uint32_t> peerScale(world * segments_.size());  // scale / world as bits, per peer
  for (size_t peer = 0; peer < world; ++peer)
    for (size_t s = 0; s < segments_.size(); ++s) {
      const float scale = scaleAt(recvBuf_, peer, s) * (1.f / float(world));
      std::memcpy(&peerScale[peer * segments_.size() + s], &scale, 4);
    }
  // x[0..8) of byte `byte` of segment seg's chunk.
  auto serverValues = [&](const Segment& seg, size_t segIndex, size_t byte, float* x) {
    for (size_t k = 0; k < 8; ++k) x[k] = 0.f;
    for (size_t peer = 0; peer < world; ++peer) {
      const uint32_t* mask =
          kSignMasks.mask[recvBuf_[peer * messageBytes_ + seg.byteOffset + byte]];
      const uint32_t scaleBits = peerScale[peer * segments_.size() + segIndex];
      for (size_t k = 0; k < 8; ++k) x[k] += flipped(scaleBits, mask[k]);
    }
    const float* error = serverError_.data() + seg.chunkOffset + byte * 8;
    for (size_t k = 0; k < 8; ++k) x[k] += error[k];
  };
#pragma omp parallel for schedule(dynamic, 1)
  for (long b = 0; b < long(blocks_.size()); ++b) {
    const Block& block = blocks_[size_t(b)];
    const Segment& seg = segments_[block.segment];
    double lanes[8] = {};
    for (size_t i = block.begin; i < block.end; i += 8) {
      float x[8];
      serverValues(seg, block.segment, i / 8, x);
      for (size_t k = 0; k < 8; ++k) lanes[k] += double(x[k]) * double(x[k]);
    }
    partial_[size_t(b)] = laneSum(lanes);
  }
  std::vector<float> scales(segments_.size(), 0.f);
  std::vector<double> sums(segments_.size(), 0.0);
  for (size_t b = 0; b < blocks_.size(); ++b) sums[blocks_[b].segment] += partial_[b];
  for (size_t s = 0; s < segments_.size(); ++s) {
    if (segments_[s].chunk) scales[s] = float(std::sqrt(sums[s] / double(segments_[s].chunk)));
    setScale(sendBuf_, 0, s, scales[s]);
  }
#pragma omp parallel for schedule(dynamic, 1)
  for (long b = 0; b < long(blocks_.size()); ++b) {
    const Block& block = blocks_[size_t(b)];
    const Segment& seg = segments_[block.segment];
    for (size_t i = block.begin; i < block.end; i += 8) {
      float x[8];
      serverValues(seg, block.segment, i / 8, x);
      sendBuf_[seg.byteOffset + i / 8] =
          packWithError(x, scales[block.segment], serverError_.data() + seg.chunkOffset + i);
    }
  }
}

// Every server's chunks (chunk p of a tensor comes from rank p) decoded straight into buf, block
// by block, each followed by the hooks' after.
void CompressedAllreduce::decode(float* buf, const Hooks& hooks) {
  const size_t world = size_t(world_), items = blocks_.size() * world;
#pragma omp parallel for schedule(dynamic, 1)
  for (long item = 0; item < long(items); ++item) {
    const Block& block = blocks_[size_t(item) / world];
    const size_t peer = size_t(item) % world;
    const auto [from, to] = callerRange(block, peer);
    if (from >= to) continue;
    const Segment& seg = segments_[block.segment];
    const uint8_t* bits = recvBuf_.data() + peer * messageBytes_ + seg.byteOffset + block.begin / 8;
    unpackSigns(bits, to - from, scaleAt(recvBuf_, peer, block.segment), buf + from);
    if (hooks.after) hooks.after(from, to);
  }
}

void CompressedAllreduce::run(float* buf, const Hooks& hooks) {
  if (world_ == 1) {  // nothing to average; the hooks still run
    if (hooks.before && count_) hooks.before(0, count_);
    if (hooks.after && count_) hooks.after(0, count_);
    return;
  }
  ++calls_;
  compressWorker(buf, hooks);
  exchange(sendBuf_, recvBuf_, /*perPeerChunk=*/true, kTagWorker);
  compressServer();
  exchange(sendBuf_, recvBuf_, /*perPeerChunk=*/false, kTagServer);
  decode(buf, hooks);
}

}  // namespace ds::comm
