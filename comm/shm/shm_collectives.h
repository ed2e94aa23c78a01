// The shared-memory collectives (one per file), run synchronously on the group's worker over a
// ShmLink. Every one is a pipeline over chunks that fit a slot half, so any size works with a
// bounded segment; consecutive chunks (across collectives too) use alternate slot halves
// (ShmLink::nextHalf), so a rank may fill the next chunk while the others still read the last.
// Reductions combine the members' contributions in rank order (op(op(r0, r1), r2)...), fp16/bf16
// widened to fp32 and rounded once (comm/gloo/reduce_kernels): bitwise the gloo path's result
// wherever gloo's order is also rank order (2 ranks; gloo's direct allreduce). Counts are elements;
// counts of zero do no step at all.
// Where the link's single-copy path is on (ShmLink::cmaFor the buffer's bytes: the allreduce/
// broadcast/reduce buffer, the reduce_scatter input, the allgather output), every collective
// but barrier takes it instead (shm_single_copy.cc: the same results, bitwise). With CMA refused
// but peer mapping on (ShmLink::mapOnlyFor), a collective whose buffers are registered on every
// member takes it too, through the mappings (ShmLink::enterMapped: one step to find out).
#pragma once

#include <cstddef>
#include <vector>

#include "comm/shm/shm_link.h"
#include "comm/types.h"

namespace ds::comm::shm_impl {

// Whether the shm path reduces this dtype (fp32, fp16, bf16, int32, int64).
bool reducible(DType t);

void allreduce(ShmLink& link, void* data, size_t count, DType t, ReduceOp op);
// input: size() blocks of counts[i] elements; output: this rank's reduced block (may be the
// input's own block).
void reduceScatter(ShmLink& link, const void* input, void* output,
                   const std::vector<size_t>& counts, DType t, ReduceOp op);
// input: this rank's block; output: all blocks in rank order (input may alias its block).
void allgather(ShmLink& link, const void* input, void* output, const std::vector<size_t>& counts,
               size_t elemSize);
void broadcast(ShmLink& link, void* data, size_t bytes, int root);
// The result lands at root only; other members' buffers are untouched.
void reduce(ShmLink& link, void* data, size_t count, DType t, int root, ReduceOp op);
void barrier(ShmLink& link);

// The single-copy forms (shm_single_copy.cc); the same contracts, for counts > 0. entered: the
// buffer is already published and the entry step taken (ShmLink::enterMapped).
void allreduceSingleCopy(ShmLink& link, void* data, size_t count, DType t, ReduceOp op,
                         bool entered = false);
void reduceScatterSingleCopy(ShmLink& link, const void* input, void* output,
                             const std::vector<size_t>& counts, DType t, ReduceOp op,
                             bool entered = false);
void allgatherSingleCopy(ShmLink& link, const void* input, void* output,
                         const std::vector<size_t>& counts, size_t elemSize, bool entered = false);
void broadcastSingleCopy(ShmLink& link, void* data, size_t bytes, int root, bool entered = false);
void reduceSingleCopy(ShmLink& link, void* data, size_t count, DType t, int root, ReduceOp op,
                      bool entered = false);

// Grows the link's scratch to what a single-copy reduction of dtype t uses, so that the reduction
// allocates nothing once past its entry step (called before ShmLink::enterMapped).
void reserveSingleCopyScratch(ShmLink& link, DType t);

// The single-copy reductions' chunk, in bytes per peer: `requested` (DS_COMM_SHM_CMA_CHUNK_BYTES)
// when > 0, else half of `l2Bytes` over the group's `ranks` (the peers' scratch chunks and this
// rank's own chunk stay in L2 while the reduce reads them; 256 KiB when l2Bytes is 0, unknown);
// either way a multiple of 4 KiB in [16 KiB, 4 MiB]. Measured on a 512 KiB-L2 Zen at 2 ranks,
// 16 MiB fp32 allreduce: 128 KiB chunks 0-6% faster than 256 KiB
// (bench/results/comm_efficiency.txt).
size_t cmaChunkBytes(size_t requested, int ranks, size_t l2Bytes);
// This CPU's L2 data cache per core in bytes (sysconf), 0 when unknown.
size_t l2CacheBytes();

// dst[i] = op over srcs[0..n)[i] in rank order (kAvg: then / n), via fp32 for 16-bit types; then
// copy[i] = dst[i] unless copy is null. dst may be one of the srcs exactly (no partial overlap);
// copy overlaps nothing.
void reduceSlice(ShmLink& link, void* dst, void* copy, const std::vector<const char*>& srcs,
                 size_t count, DType t, ReduceOp op);

}  // namespace ds::comm::shm_impl
