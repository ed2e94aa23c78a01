// CompressedAllreduce: the error-compensated 1-bit average of 1-bit Adam / 0/1 Adam (DeepSpeed's
// compressed_allreduce, runtime/comm/nccl.py), over any ProcessGroup by point-to-point messages.
// Not an exact allreduce: each rank's result is the same sign-times-scale approximation of the
// average, and what compression dropped is kept in the per-worker and per-server error buffers
// and added back into the next call, so the results are unbiased over calls.
// Invariants: every rank calls run() with the same count in the same order; every rank ends with
// bitwise the same output; bytesSent() counts every byte this rank put on the wire.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace ds::comm {

class ProcessGroup;

// Sign packing, most significant bit first (numpy/cupy packbits order); bit = 1 for x >= 0
// (DeepSpeed's sign().add_(1).bool(): +0 and -0 both count as positive). n % 8 == 0.
void packSigns(const float* values, size_t n, uint8_t* bits);
// out[i] = (bit ? +scale : -scale)
void unpackSigns(const uint8_t* bits, size_t n, float scale, float* out);
// out[i] += (bit ? +scale : -scale)
void unpackSignsAdd(const uint8_t* bits, size_t n, float scale, float* out);

// One error-compensated compression in place of DeepSpeed's worker/server step: x += error;
// scale = ||x|| / sqrt(n); bits = sign(x); error = x - scale * sign(x). Returns the scale.
// x is left holding the compensated values (not the signs).
float compressWithFeedback(float* x, float* error, size_t n, uint8_t* bits);

class CompressedAllreduce {
 public:
  // group == nullptr or of one rank: run() leaves the buffer as it is (nothing to average).
  // segments: the sizes of the tensors laid end to end in the buffer (DeepSpeed compresses each
  // parameter tensor on its own: one worker scale per tensor, one server scale per chunk). Each
  // is padded to a multiple of world * lcm(world, 8) (DeepSpeed's corrected_tensor_size) so every
  // server chunk is whole bytes; all tensors travel in one message per peer and phase.
  CompressedAllreduce(ProcessGroup* group, std::vector<size_t> segments);

  // Optional work fused into run()'s passes over buf, block by block (blocks of at most
  // kBlockElems, never across a tensor; called from several threads at once for disjoint
  // blocks, every element exactly once): before(begin, end) just before buf[begin, end) is first
  // read (e.g. the momentum update that produces it); after(begin, end) once buf[begin, end)
  // holds the average (e.g. the parameter update that consumes it). The block stays in cache.
  struct Hooks {
    std::function<void(size_t begin, size_t end)> before, after;
  };
  static constexpr size_t kBlockElems = size_t(1) << 15;

  // buf[0..count) := the 1-bit estimate of the average over ranks of buf (blocking; collective).
  // Phase 1: each rank compensates every tensor with its worker error and sends the packed signs
  // of chunk j of each (plus the tensor's scale) to rank j; phase 2: rank j averages the chunks
  // it received (sign * scale / world, in rank order) plus its server error, compresses that once
  // more and sends the result (signs and one scale per chunk) to every rank. Each compression is
  // two passes over its values (the sum of squares, then the signs and the new error), threaded
  // over blocks; the scales' sums add the blocks' partial sums in a fixed order.
  void run(float* buf, const Hooks& hooks = {});

  void resetErrors();  // zero both error buffers (0/1 Adam at its variance freeze; a load)

  size_t count() const { return count_; }
  size_t paddedCount() const { return padded_; }
  size_t chunkCount() const { return chunk_; }  // elements each rank serves (all tensors)
  // Bytes this rank sent over all run() calls so far (payload: signs and scales).
  uint64_t bytesSent() const { return bytesSent_; }
  uint64_t calls() const { return calls_; }
  // Bytes one call sends per rank: 2 (world - 1) (chunk / 8 + 4 * tensors).
  uint64_t bytesPerCall() const;
  // Bytes per rank of a bandwidth-optimal fp32 allreduce of count elements: 2 (world-1)/world
  // * 4 count (ring / reduce-scatter + allgather), the reference the savings are stated against.
  static uint64_t plainAllreduceBytes(size_t count, int world);

  const std::vector<float>& workerError() const { return workerError_; }
  const std::vector<float>& serverError() const { return serverError_; }

 private:
  // One tensor: where it sits in the caller's buffer, in the padded worker space, in a server
  // chunk (elements) and in a message (bytes).
  struct Segment {
    size_t offset = 0, size = 0, paddedOffset = 0, padded = 0, chunk = 0;
    size_t chunkOffset = 0, byteOffset = 0;
  };
  // A piece of every server chunk of one tensor: elements [begin, end) of the chunk (multiples
  // of 8 but the chunk's end). Phase 1 and the decoding visit it once per peer's chunk.
  struct Block {
    size_t segment = 0, begin = 0, end = 0;
  };
  void exchange(const std::vector<uint8_t>& out, std::vector<uint8_t>& in, bool perPeerChunk,
                int tag);
  void compressWorker(float* buf, const Hooks& hooks);
  void compressServer();
  void decode(float* buf, const Hooks& hooks);
  // The caller's range [begin, end) of block `block` in peer `peer`'s chunk (empty: padding).
  std::pair<size_t, size_t> callerRange(const Block& block, size_t peer) const;
  float scaleAt(const std::vector<uint8_t>& buf, size_t peer, size_t segment) const;
  void setScale(std::vector<uint8_t>& buf, size_t peer, size_t segment, float scale) const;

  ProcessGroup* group_;
  int rank_ = 0, world_ = 1;
  std::vector<Segment> segments_;
  size_t count_ = 0, padded_ = 0, chunk_ = 0;
  size_t messageBytes_ = 0;  // per peer: every tensor's chunk signs, then one scale per tensor
  std::vector<Block> blocks_;
  std::vector<double> partial_;  // per (block, peer): sums of squares of the current pass
  std::vector<float> workerError_, serverError_;
  std::vector<uint8_t> sendBuf_, recvBuf_;
  uint64_t bytesSent_ = 0, calls_ = 0;
};

}  // namespace ds::comm
