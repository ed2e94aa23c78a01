// Direct reduce-scatter for small buffers: every rank sends each peer that peer's block of its
// input, all at once, into the group's receive channel for this shape (its receives posted right
// after those sends), and reduces the n-1 blocks it receives into its own: one round instead of
// the ring's n-1 or halving's log2 n, the same (n-1)/n of the buffer sent per rank. Order: this
// rank's block first, then the peers' in rank order (fixed per rank).
// Messages travel as pieces (messagePieces): piece k is reduced while k+1 is in flight.
#include <cstring>
#include <vector>

#include "comm/gloo/collectives.h"
#include "comm/gloo/reduce_kernels.h"

namespace ds::comm::gloo_impl {

bool directReduceScatter(GlooLink& link, const void* input, void* out, DType t, const Blocks& b,
                         ReduceOp op, const char* what) {
  const int n = link.size(), r = link.rank();
  const size_t es = dtypeSize(t);
  const size_t total = b.offsets.back() + b.counts.back();
  std::vector<size_t> key{2, es};
  key.insert(key.end(), b.counts.begin(), b.counts.end());
  std::vector<size_t> recvBytes(n, b.counts[r] * es);
  recvBytes[r] = 0;
  RecvChannel* ch = link.channel(key, recvBytes, total * es, messagePieces(b.maxCount * es));
  if (ch == nullptr) return false;
  const char* in = static_cast<const char*>(input);
  UBuf inBuf = link.buffer(const_cast<char*>(in), total * es);
  std::vector<int> sentTo;
  for (int k = 1; k < n; ++k) {  // right neighbour first: spreads the senders over receivers
    const int p = (r + k) % n;
    if (b.counts[p] == 0) continue;
    link.sendPieces(ch->pieces, inBuf, p, GlooLink::channelSlot(*ch), b.offsets[p] * es,
                    b.counts[p] * es, what);
    sentTo.push_back(p);
  }
  link.channelPost(*ch, what);  // after the sends (RecvChannel)
  const size_t count = b.counts[r];
  if (count > 0) {
    // out is input's own block exactly or lies outside the input: the first step may write it.
    const char* own = in + b.offsets[r] * es;
    char* dst = static_cast<char*>(out);
    const size_t bytes = count * es;
    bool first = true;
    for (int p = 0; p < n; ++p) {
      if (p == r) continue;
      for (size_t k = 0; k < ch->pieces.count(bytes); ++k) {
        const char* got = link.channelWaitPiece(*ch, p, k, what);
        const size_t at = ch->pieces.offset(k);
        reduceFrom(dst + at, (first ? own : dst) + at, got, ch->pieces.size(bytes, k) / es, t, op);
      }
      first = false;
    }
  }
  link.finishChannel(*ch);  // on every rank, even one with an empty block: seqs stay aligned
  for (int p : sentTo) link.waitSendPieces(ch->pieces, inBuf, p, b.counts[p] * es, what);
  return true;
}

}  // namespace ds::comm::gloo_impl
