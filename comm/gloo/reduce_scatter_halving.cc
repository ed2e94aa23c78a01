// Recursive-halving reduce-scatter for power-of-two worlds (after Thakur, Rabenseifner & Gropp):
// log2(n) rounds instead of the ring's n-1, the same (n-1)/n of the buffer sent per rank. In the
// round at distance d the partner r^d shares this rank's current range of blocks; each sends the
// half holding the partner's block and keeps (and reduces) the half holding its own. Blocks may
// be uneven or empty: both partners know the layout, so an empty half is neither sent nor
// received. All receives are posted up front. The input is only read; the last round reduces
// straight into `out`.
#include <algorithm>
#include <cstring>
#include <vector>

#include "comm/gloo/collectives.h"
#include "comm/gloo/reduce_kernels.h"
#include "core/error.h"

namespace ds::comm::gloo_impl {

bool isPowerOfTwo(int n) { return n > 0 && (n & (n - 1)) == 0; }

void halvingReduceScatter(GlooLink& link, const void* input, void* out, DType t, const Blocks& b,
                          ReduceOp op, uint64_t slots, const char* what) {
  const int n = link.size(), r = link.rank();
  const size_t es = dtypeSize(t);
  const char* in = static_cast<const char*>(input);
  char* dst = static_cast<char*>(out);
  if (n == 1 || b.maxCount == 0) {
    const char* own = in + b.offsets[r] * es;
    if (dst != own && b.counts[r] > 0) std::memmove(dst, own, b.counts[r] * es);
    return;
  }
  DS_CHECK(isPowerOfTwo(n), "halvingReduceScatter needs a power-of-two world, got {}", n);
  auto elems = [&](int lo, int hi) { return b.offsets[hi - 1] + b.counts[hi - 1] - b.offsets[lo]; };
  // The rounds' ranges are known up front, so every receive is posted right after the first send
  // (before it, the two directions of a pair can serialize under gloo's pair lock; see
  // ringAllgatherInPlace): each round receives into its own region of tmp (n/2 + n/4 + ... < n
  // blocks), and a partner's data never waits for a ready-to-receive notice. acc holds the range
  // kept after the first round (at most n/2 blocks), relative to its start.
  struct Round {
    int partner, klo, khi, slo, shi;
    size_t tmpOff;
  };
  std::vector<Round> rounds;
  size_t tmpElems = 0;
  for (int d = n / 2, lo = 0, hi = n; d >= 1; d /= 2) {
    const int mid = lo + (hi - lo) / 2;
    const bool keepLow = r < mid;
    Round rd{
        r ^ d,   keepLow ? lo : mid, keepLow ? mid : hi, keepLow ? mid : lo, keepLow ? hi : mid,
        tmpElems};
    tmpElems += size_t(d) * b.maxCount;
    rounds.push_back(rd);
    lo = rd.klo;
    hi = rd.khi;
  }
  const size_t accBytes = size_t(n / 2) * b.maxCount * es;
  char* acc = link.scratch(1, accBytes + tmpElems * es);
  char* tmp = acc + accBytes;
  const size_t accBase = b.offsets[rounds[0].klo];  // element offset of acc[0]
  UBuf inBuf = link.buffer(const_cast<char*>(in), (b.offsets.back() + b.counts.back()) * es);
  UBuf accBuf = link.buffer(acc, accBytes);
  std::vector<UBuf> tmpBufs(rounds.size());
  const size_t firstSend = elems(rounds[0].slo, rounds[0].shi) * es;
  if (firstSend) {
    link.send(inBuf, rounds[0].partner, slots, b.offsets[rounds[0].slo] * es, firstSend, what);
  }
  for (size_t k = 0; k < rounds.size(); ++k) {
    const Round& rd = rounds[k];
    const size_t keepBytes = elems(rd.klo, rd.khi) * es;
    if (keepBytes == 0) continue;
    tmpBufs[k] = link.buffer(tmp + rd.tmpOff * es, keepBytes);
    link.recv(tmpBufs[k], rd.partner, slots + k, 0, keepBytes, what);
  }
  for (size_t k = 0; k < rounds.size(); ++k) {
    const Round& rd = rounds[k];
    const bool first = k == 0, last = k + 1 == rounds.size();
    const size_t keepBytes = elems(rd.klo, rd.khi) * es, sendBytes = elems(rd.slo, rd.shi) * es;
    if (sendBytes && !first) {  // the first round's went out before the receives were posted
      link.send(accBuf, rd.partner, slots + k, (b.offsets[rd.slo] - accBase) * es, sendBytes, what);
    }
    if (keepBytes) {
      link.waitRecv(tmpBufs[k], rd.partner, what);
      const size_t at = b.offsets[rd.klo];
      const char* mine = first ? in + at * es : acc + (at - accBase) * es;
      char* into = last ? dst : acc + (at - accBase) * es;
      reduceFrom(into, mine, tmp + rd.tmpOff * es, keepBytes / es, t, op);
    }
    if (sendBytes) link.waitSend(first ? inBuf : accBuf, rd.partner, what);
  }
}

void reduceScatterBlocks(GlooLink& link, const void* input, void* out, DType t, const Blocks& b,
                         ReduceOp op, uint64_t slots, const char* what) {
  if (link.size() > 2 && isPowerOfTwo(link.size())) {
    halvingReduceScatter(link, input, out, t, b, op, slots, what);
  } else {
    ringReduceScatter(link, input, out, t, b, op, slots, what);
  }
}

}  // namespace ds::comm::gloo_impl
