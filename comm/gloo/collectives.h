// The gloo backend's collective algorithms, one per file, all written on gloo's pair transport
// (unbound buffers, one slot block per collective) instead of libgloo's own collectives, which
// stall (new-API ring at 4+ ranks) or are silently wrong (old AllreduceBcube at non-powers of 2)
// on these machines. Each runs synchronously on the group's worker thread; failures throw
// CommError naming the peer (GlooLink). Counts are elements; any count, any world size.
#pragma once

#include <cstddef>
#include <vector>

#include "comm/gloo/gloo_link.h"
#include "comm/types.h"

namespace ds::comm::gloo_impl {

// A split of a flat buffer into one block per rank.
struct Blocks {
  std::vector<size_t> counts;   // elements per block
  std::vector<size_t> offsets;  // element offset of each block
  size_t maxCount = 0;
};
Blocks evenBlocks(size_t count, int n);  // sizes differ by at most one, larger blocks first
Blocks blocksFrom(const std::vector<size_t>& counts);

// Ring building blocks over a buffer of `b` blocks.
// Reduce-scatter: `input` is only read; afterwards `out` holds block rank() reduced over all ranks
// (native types only; no avg division). `out` may be input's own block exactly, or memory that
// does not overlap the input. Uses scratch 1. Pipelined in segments (ringSegmentBytes()).
// halvingReduceScatter: the same contract for power-of-two worlds in log2(n) rounds (scratch 1).
// reduceScatterBlocks picks: halving for n = 4, 8, ..., the ring otherwise (n = 2: one round
// either way; the ring's segments pipeline it).
// directReduceScatter: the same contract in one round, through a receive channel (small
// buffers); false (nothing done) when the group's channel cache is full.
bool directReduceScatter(GlooLink& link, const void* input, void* out, DType t, const Blocks& b,
                         ReduceOp op, const char* what);
void halvingReduceScatter(GlooLink& link, const void* input, void* out, DType t, const Blocks& b,
                          ReduceOp op, uint64_t slots, const char* what);
void reduceScatterBlocks(GlooLink& link, const void* input, void* out, DType t, const Blocks& b,
                         ReduceOp op, uint64_t slots, const char* what);
bool isPowerOfTwo(int n);
// Allgather, in place: afterwards every block holds its owner's block.
void ringReduceScatter(GlooLink& link, const void* input, void* out, DType t, const Blocks& b,
                       ReduceOp op, uint64_t slots, const char* what);
// Every receive goes straight into its block's place, so all are posted before the first send
// (one buffer each); a caller may post them earlier with postAllgatherRecvs (allreduce does,
// before its reduce-scatter: no block can arrive before this rank has read its input for it,
// since the block's owner needs that contribution first) and pass them in.
std::vector<UBuf> postAllgatherRecvs(GlooLink& link, void* data, size_t elemSize, const Blocks& b,
                                     uint64_t slots, const char* what);
void ringAllgatherInPlace(GlooLink& link, void* data, size_t elemSize, const Blocks& b,
                          uint64_t slots, const char* what, std::vector<UBuf>* posted = nullptr);

// Allreduce, in place. Ring (reduce-scatter then allgather) for large buffers; direct exchange
// (everyone sends everyone its buffer, reduced in rank order) for small ones.
void allreduceRing(GlooLink& link, void* data, size_t count, DType t, ReduceOp op);
void allreduceDirect(GlooLink& link, void* data, size_t count, DType t, ReduceOp op);
// n = 2 only: one exchange through a receive channel, op(rank 0's, rank 1's) on both ranks.
// false (nothing done) when n != 2 or the group's channel cache is full.
bool allreducePair(GlooLink& link, void* data, size_t count, DType t, ReduceOp op);
// input: size() blocks of counts[i] elements; output: this rank's reduced block.
void reduceScatterRing(GlooLink& link, const void* input, void* output,
                       const std::vector<size_t>& counts, DType t, ReduceOp op);
// input: this rank's block; output: all blocks in rank order. input may alias its block.
void allgatherRing(GlooLink& link, const void* input, void* output,
                   const std::vector<size_t>& counts, size_t elemSize);
// Pipelined chain from root, in segments.
void broadcastChain(GlooLink& link, void* data, size_t bytes, int root);
// Ring reduce-scatter into scratch, then blocks gathered at root. Non-root buffers untouched.
void reduceToRoot(GlooLink& link, void* data, size_t count, DType t, int root, ReduceOp op);
// Dissemination barrier: ceil(log2 n) rounds of 1-byte messages.
void barrierDissemination(GlooLink& link);

// Tuning knobs, read once from the environment (declared in comm/comm_knobs.h; docs/knobs.md).
size_t smallAllreduceBytes();  // DS_GLOO_SMALL_ALLREDUCE_BYTES, default 32 KiB
size_t segmentBytes();         // DS_GLOO_SEGMENT_BYTES, default 1 MiB (broadcast pipeline)
size_t ringSegmentBytes();     // DS_GLOO_RING_SEGMENT_BYTES, default 1 MiB (ring reduce-scatter)
size_t pairAllreduceBytes();   // DS_GLOO_PAIR_ALLREDUCE_BYTES, default 4 MiB (allreducePair)
size_t directReduceScatterBytes();  // DS_GLOO_DIRECT_REDUCE_SCATTER_BYTES, default 4 MiB
// How a message of messageBytes travels: the one-round channel algorithms and the ring allgather
// send each message as equal pieces (at least 3, a count that is not a power of two, each at
// most DS_GLOO_PIECE_BYTES, default 384 KiB; 0: whole messages), and reduce piece k while piece
// k+1 is in flight. The piece size is a multiple of 64 B (any element size divides it); whole
// (Pieces{}) under 96 KiB.
Pieces messagePieces(size_t messageBytes);

}  // namespace ds::comm::gloo_impl
