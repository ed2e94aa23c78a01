// The two ring primitives (after Patarasuk & Yuan): n-1 steps, each sending one block to the right
// neighbour while receiving one from the left. Reduce-scatter reduces what it receives with its
// own input and forwards it, segment by segment (so reducing one segment overlaps the transfer of
// the next), without ever writing the input; allgather receives straight into place. Zero-sized
// blocks are skipped on both sides (both know the layout). Slots: `slots + step`.
#include <algorithm>
#include <cstring>
#include <vector>

#include "comm/gloo/collectives.h"
#include "comm/gloo/reduce_kernels.h"

namespace ds::comm::gloo_impl {
namespace {

constexpr size_t kMaxSegments = 8;

}  // namespace

void ringReduceScatter(GlooLink& link, const void* input, void* out, DType t, const Blocks& b,
                       ReduceOp op, uint64_t slots, const char* what) {
  const int n = link.size(), r = link.rank();
  const size_t es = dtypeSize(t);
  const char* in = static_cast<const char*>(input);
  char* dst = static_cast<char*>(out);
  const char* own = in + b.offsets[r] * es;
  if (n == 1 || b.maxCount == 0) {
    if (dst != own && b.counts[r] > 0) std::memmove(dst, own, b.counts[r] * es);
    return;
  }
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  const size_t total = b.offsets.back() + b.counts.back();
  // Segments: at least ringSegmentBytes(), at most kMaxSegments per block.
  const size_t seg = std::max(
      {size_t{1}, ringSegmentBytes() / es, (b.maxCount + kMaxSegments - 1) / kMaxSegments});
  auto segments = [&](size_t count) { return (count + seg - 1) / seg; };
  auto segLen = [&](size_t count, size_t k) { return std::min(seg, count - k * seg) * es; };
  // Two halves: the block received (and reduced in place) this step, the one sent on from the
  // previous step. A half is received into again only after its sends completed.
  const size_t halfBytes = b.maxCount * es;
  char* acc = link.scratch(1, 2 * halfBytes);
  UBuf inBuf = link.buffer(const_cast<char*>(in), total * es);
  UBuf halves[2] = {link.buffer(acc, halfBytes), link.buffer(acc + halfBytes, halfBytes)};
  size_t pendingIn = 0, pending[2] = {0, 0};
  const int firstB = (r + n - 1) % n;  // step 0 sends this rank's own contribution to it
  for (size_t k = 0; k < segments(b.counts[firstB]); ++k) {
    link.send(inBuf, right, slots, (b.offsets[firstB] + k * seg) * es, segLen(b.counts[firstB], k),
              what);
    ++pendingIn;
  }
  for (int s = 0; s < n - 1; ++s) {
    const int h = s % 2, recvB = (r - s - 2 + 2 * n) % n;
    const size_t count = b.counts[recvB], nseg = segments(count);
    const bool last = s == n - 2;  // recvB == r: the result goes to out
    char* half = acc + h * halfBytes;
    for (size_t k = 0; k < nseg; ++k) {
      link.recv(halves[h], left, slots + s, k * seg * es, segLen(count, k), what);
    }
    for (size_t k = 0; k < nseg; ++k) {
      link.waitRecv(halves[h], left, what);
      const size_t elems = segLen(count, k) / es;
      const char* mine = in + (b.offsets[recvB] + k * seg) * es;
      char* got = half + k * seg * es;
      if (last) {
        reduceFrom(dst + k * seg * es, mine, got, elems, t, op);
      } else {
        reduceFrom(got, mine, got, elems, t, op);
        link.send(halves[h], right, slots + s + 1, k * seg * es, segLen(count, k), what);
        ++pending[h];
      }
    }
    for (; pendingIn > 0; --pendingIn) link.waitSend(inBuf, right, what);
    for (; pending[1 - h] > 0; --pending[1 - h]) link.waitSend(halves[1 - h], right, what);
  }
}

// Allgather messages travel as messagePieces of the largest block (the same on every rank); a
// step's pieces share its slot.
std::vector<UBuf> postAllgatherRecvs(GlooLink& link, void* data, size_t elemSize, const Blocks& b,
                                     uint64_t slots, const char* what) {
  const int n = link.size(), r = link.rank();
  std::vector<UBuf> recvs(std::max(n - 1, 0));
  if (n == 1 || b.maxCount == 0) return recvs;
  const int left = (r + n - 1) % n;
  const Pieces pieces = messagePieces(b.maxCount * elemSize);
  char* base = static_cast<char*>(data);
  for (int s = 0; s < n - 1; ++s) {
    int recvB = (r - s - 1 + n) % n;
    size_t recvBytes = b.counts[recvB] * elemSize;
    if (recvBytes == 0) continue;
    recvs[s] = link.buffer(base + b.offsets[recvB] * elemSize, recvBytes);
    link.recvPieces(pieces, recvs[s], left, slots + s, 0, recvBytes, what);
  }
  return recvs;
}

void ringAllgatherInPlace(GlooLink& link, void* data, size_t elemSize, const Blocks& b,
                          uint64_t slots, const char* what, std::vector<UBuf>* posted) {
  const int n = link.size(), r = link.rank();
  if (n == 1 || b.maxCount == 0) return;
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  const size_t total = (b.offsets.back() + b.counts.back()) * elemSize;
  const Pieces pieces = messagePieces(b.maxCount * elemSize);
  UBuf sendBuf = link.buffer(data, total);
  auto sendBlock = [&](int s) { return (r - s + n) % n; };  // the block step s sends
  auto sendStep = [&](int s) {
    const int blk = sendBlock(s);
    link.sendPieces(pieces, sendBuf, right, slots + s, b.offsets[blk] * elemSize,
                    b.counts[blk] * elemSize, what);
  };
  // Step 0's sends go out before this rank posts its receives: posting the receives first (their
  // ready-to-receive notices) let the two directions of a pair serialize under gloo's pair lock
  // whenever back-to-back calls overlapped, and 2-rank 1 MiB allgathers in a loop ran at
  // 0.3-1.5 ms per call instead of 0.31-0.47 ms (bimodal, run to run).
  std::vector<UBuf> own;
  const bool step0Sent = posted == nullptr;
  if (step0Sent) {
    sendStep(0);
    own = postAllgatherRecvs(link, data, elemSize, b, slots, what);
    posted = &own;
  }
  std::vector<UBuf>& recvs = *posted;
  for (int s = 0; s < n - 1; ++s) {
    if (s > 0 || !step0Sent) sendStep(s);
    if (recvs[s]) {
      link.waitRecvPieces(pieces, recvs[s], left, b.counts[(r - s - 1 + n) % n] * elemSize, what);
    }
    link.waitSendPieces(pieces, sendBuf, right, b.counts[sendBlock(s)] * elemSize, what);
  }
}

}  // namespace ds::comm::gloo_impl
