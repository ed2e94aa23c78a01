// Two-rank allreduce in one round: each rank sends its whole buffer to the other, which lands in
// the group's receive channel for this shape (posted right after the sends), and both reduce
// op(rank 0's, rank 1's), so the result is bitwise identical on both. Same bytes on the wire as the
// ring at n = 2 (two halves each way), but one round.
// The message travels as pieces (messagePieces): piece k is reduced while k+1 is in flight.
#include "comm/gloo/collectives.h"
#include "comm/gloo/reduce_kernels.h"

namespace ds::comm::gloo_impl {

bool allreducePair(GlooLink& link, void* data, size_t count, DType t, ReduceOp op) {
  if (link.size() != 2) return false;
  if (count == 0) return true;
  const int r = link.rank(), peer = 1 - r;
  DType wt = workType(t);
  const size_t bytes = count * dtypeSize(wt);
  std::vector<size_t> recvBytes(2, 0);
  recvBytes[peer] = bytes;
  RecvChannel* ch = link.channel({1, dtypeSize(wt), count}, recvBytes, bytes, messagePieces(bytes));
  if (ch == nullptr) return false;
  char* mine = static_cast<char*>(data);
  if (wt != t) {
    mine = link.scratch(0, bytes);
    toWork(data, t, mine, count);
  }
  UBuf sendBuf = link.buffer(mine, bytes);
  link.sendPieces(ch->pieces, sendBuf, peer, GlooLink::channelSlot(*ch), 0, bytes, "allreduce");
  link.channelPost(*ch, "allreduce");  // after the sends (RecvChannel)
  const size_t es = dtypeSize(wt);
  for (size_t k = 0; k < ch->pieces.count(bytes); ++k) {
    const char* theirs = link.channelWaitPiece(*ch, peer, k, "allreduce");
    // Piece k of `mine` is overwritten only once sent (a pair's sends complete in order).
    link.waitSend(sendBuf, peer, "allreduce");
    char* at = mine + ch->pieces.offset(k);
    const size_t n = ch->pieces.size(bytes, k) / es;
    reduceFrom(at, r == 0 ? at : theirs, r == 0 ? theirs : at, n, wt, op);
  }
  link.finishChannel(*ch);
  finishAvg(mine, count, wt, op, 2);
  if (wt != t) fromWork(mine, t, data, count);
  return true;
}

}  // namespace ds::comm::gloo_impl
