// The single-copy collectives (shm_collectives.h), over cross-memory attach (cma.h) on the
// members' own buffers: entry step (every member has published its buffers), the copies, exit
// step (nobody returns, or reuses its buffers, before every peer is done reading or writing
// them). Two steps per call whatever the size.
// allreduce: rank p owns slice p (sliceOf over the whole buffer); per chunk (the link's
//   cmaChunkBytes: half the L2 over the ranks, so that the peers' chunks and its own stay there) it
//   reads the others' chunk of its slice into a cache-resident scratch, reduces in rank order
//   (reduceChunk: the slot path's arithmetic, bitwise) into its own buffer and writes the result
//   into every other buffer at the same offset, lines the read has just brought into the cache.
//   Only the owner of a slice reads or writes that slice of any buffer during the call. Per
//   rank: (n-1)/n of the buffer read remotely, as much written remotely, 1/n reduced locally.
// reduce: the same, but the owner keeps its result in a scratch chunk and writes it into the
//   root's buffer only (the root's slice: into its own); the others' buffers are only read.
// reduce_scatter: rank p reads block p of the others' inputs, chunk by chunk, and reduces it
//   with its own block p into its output (which may be that block).
// allgather: every rank reads the others' blocks straight into its output (one copy).
// broadcast: the others read the root's buffer straight into theirs.
// A peer whose buffer lies in a registered region this rank maps (ShmLink::peerMapped;
// comm/shared_host_buffer.h) is read and written through that mapping instead: its chunk is
// reduced straight from its buffer (no copy into scratch) and the result stored into it with a
// plain copy; the same operations in the same order, so bitwise the same results. Peers mapped and
// peers copied with CMA mix freely within one collective.
// Peers are visited starting after this rank (r+1, r+2, ...) so that not every rank reads the
// same peer at once. Whatever can throw before the copies (scratch) runs before the entry step:
// past it, every failure goes through ShmLink::fail, which lets no member return while a peer
// may still write into its buffers.
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "comm/gloo/reduce_kernels.h"
#include "comm/shm/shm_collectives.h"
#include "comm/shm/shm_slices.h"

namespace ds::comm::shm_impl {
namespace {

constexpr int kPeerScratch = 2;  // scratch indices from here on (0, 1: reduceSlice)

// A scratch of `bytes` per group rank: the peers' chunks, and this rank's reduced chunk where it
// keeps no result (reduce at a non-root).
std::vector<char*> chunkScratch(ShmLink& link, size_t bytes) {
  std::vector<char*> out(static_cast<size_t>(link.size()), nullptr);
  for (int p = 0; p < link.size(); ++p) {
    out[static_cast<size_t>(p)] =
        reinterpret_cast<char*>(link.scratch(kPeerScratch + p, (bytes + 3) / 4));
  }
  return out;
}

// The entry step: publish this member's buffer, then step (already done when `entered`: the
// mapped-only path, ShmLink::enterMapped).
void enter(ShmLink& link, const void* buffer, bool entered, const char* what) {
  if (entered) return;
  link.publish(buffer, nullptr);
  link.step(what);
}

size_t chunkOf(const ShmLink& link, DType t) {
  return std::max<size_t>(link.cmaChunkBytes() / dtypeSize(t) / 16 * 16, 16);
}

// reduceSlice's result for fp32/int32/int64 (16-bit types: reduceSlice itself), without its L1
// accumulator and the copy out of it: the chunk is reduced straight into dst, in rank order,
// one pass per source (the chunk stays in L2). dst may be srcs[k] exactly (this rank's own
// contribution); the peers' sources are read only (a scratch chunk, or a peer's own buffer
// through its mapping). head: a scratch chunk that holds the running result of ranks 0..k-1
// when k >= 2 (it may be srcs[0] itself). The same operations on the same operands in the same
// order per element as reduceSlice: bitwise its result.
void reduceChunk(ShmLink& link, char* dst, char* head, const std::vector<const char*>& srcs,
                 size_t count, DType t, ReduceOp op) {
  const int n = static_cast<int>(srcs.size());
  if (!gloo_impl::isReduceNative(t) || n < 2) {
    reduceSlice(link, dst, nullptr, srcs, count, t, op);
    return;
  }
  auto src = [&](int p) { return srcs[static_cast<size_t>(p)]; };
  int alias = -1;
  for (int p = 0; p < n; ++p) alias = src(p) == dst ? p : alias;
  if (alias < 2) {
    gloo_impl::reduceFrom(dst, src(0), src(1), count, t, op);
    for (int p = 2; p < n; ++p) gloo_impl::reduceInto(dst, src(p), count, t, op);
  } else {
    gloo_impl::reduceFrom(head, src(0), src(1), count, t, op);
    for (int p = 2; p < alias; ++p) gloo_impl::reduceInto(head, src(p), count, t, op);
    gloo_impl::reduceFrom(dst, head, dst, count, t, op);
    for (int p = alias + 1; p < n; ++p) gloo_impl::reduceInto(dst, src(p), count, t, op);
  }
  gloo_impl::finishAvg(dst, count, t, op, n);
}

// Where reduceRange delivers each reduced chunk besides dst: nowhere, into every peer's buffer,
// or into one peer's (the root's) buffer, at the same offset.
struct Deliver {
  enum Kind { kNone, kAll, kOne } kind = kNone;
  int peer = -1;
};

// Reduces `count` elements at element offset `at` of every member's published buffer (this
// rank's: `mine`) in rank order, chunk by chunk (chunkOf; the peers' chunks read into
// scratch[p]), into dst (null: into scratch[rank], a chunk), then delivers the chunk.
void reduceRange(ShmLink& link, const std::vector<char*>& scratch, const char* mine, char* dst,
                 size_t at, size_t count, DType t, ReduceOp op, Deliver to, const char* what) {
  const size_t es = dtypeSize(t);
  const int n = link.size(), r = link.rank();
  const size_t chunk = chunkOf(link, t);
  auto peer = [](int p) { return static_cast<size_t>(p); };
  std::vector<char*> mapped(peer(n), nullptr);  // peers' buffers through this rank's mapping
  for (int k = 1; k < n; ++k)
    mapped[peer((r + k) % n)] = link.peerMapped((r + k) % n, (at + count) * es, what);
  std::vector<const char*> srcs(peer(n));
  for (size_t off = 0; off < count; off += chunk) {
    const size_t m = std::min(chunk, count - off), bytes = m * es, remote = (at + off) * es;
    for (int k = 1; k < n; ++k) {
      const int p = (r + k) % n;
      if (mapped[peer(p)]) {
        srcs[peer(p)] = mapped[peer(p)] + remote;
      } else {
        link.peerRead(p, link.peerBuffer(p, 0) + remote, scratch[peer(p)], bytes, what);
        srcs[peer(p)] = scratch[peer(p)];
      }
    }
    srcs[peer(r)] = mine + off * es;
    char* out = dst ? dst + off * es : scratch[peer(r)];
    reduceChunk(link, out, scratch[0], srcs, m, t, op);
    auto deliver = [&](int p) {
      if (mapped[peer(p)]) std::memcpy(mapped[peer(p)] + remote, out, bytes);
      else link.peerWrite(p, link.peerBuffer(p, 0) + remote, out, bytes, what);
    };
    if (to.kind == Deliver::kOne) deliver(to.peer);
    for (int k = 1; to.kind == Deliver::kAll && k < n; ++k) deliver((r + k) % n);
  }
}

}  // namespace

void reserveSingleCopyScratch(ShmLink& link, DType t) {
  chunkScratch(link, chunkOf(link, t) * dtypeSize(t));
}

void allreduceSingleCopy(ShmLink& link, void* data, size_t count, DType t, ReduceOp op,
                         bool entered) {
  char* d = static_cast<char*>(data);
  const std::vector<char*> scratch = chunkScratch(link, chunkOf(link, t) * dtypeSize(t));
  enter(link, d, entered, "allreduce");
  const Slice s = sliceOf(count, link.size(), link.rank());
  const size_t at = s.begin * dtypeSize(t);
  reduceRange(link, scratch, d + at, d + at, s.begin, s.count, t, op, {Deliver::kAll}, "allreduce");
  link.step("allreduce");
}

void reduceSingleCopy(ShmLink& link, void* data, size_t count, DType t, int root, ReduceOp op,
                      bool entered) {
  char* d = static_cast<char*>(data);
  const std::vector<char*> scratch = chunkScratch(link, chunkOf(link, t) * dtypeSize(t));
  enter(link, d, entered, "reduce");
  const Slice s = sliceOf(count, link.size(), link.rank());
  const size_t at = s.begin * dtypeSize(t);
  const bool isRoot = link.rank() == root;
  reduceRange(link, scratch, d + at, isRoot ? d + at : nullptr, s.begin, s.count, t, op,
              isRoot ? Deliver{} : Deliver{Deliver::kOne, root}, "reduce");
  link.step("reduce");
}

void reduceScatterSingleCopy(ShmLink& link, const void* input, void* output,
                             const std::vector<size_t>& counts, DType t, ReduceOp op,
                             bool entered) {
  const size_t r = static_cast<size_t>(link.rank());
  size_t begin = 0;
  for (size_t b = 0; b < r; ++b) begin += counts[b];
  const char* in = static_cast<const char*>(input);
  const std::vector<char*> scratch = chunkScratch(link, chunkOf(link, t) * dtypeSize(t));
  enter(link, in, entered, "reduce_scatter");
  reduceRange(link, scratch, in + begin * dtypeSize(t), static_cast<char*>(output), begin,
              counts[r], t, op, {}, "reduce_scatter");
  link.step("reduce_scatter");
}

void allgatherSingleCopy(ShmLink& link, const void* input, void* output,
                         const std::vector<size_t>& counts, size_t elemSize, bool entered) {
  const int n = link.size(), r = link.rank();
  std::vector<size_t> offs(counts.size(), 0);
  for (size_t b = 1; b < counts.size(); ++b) offs[b] = offs[b - 1] + counts[b - 1];
  char* out = static_cast<char*>(output);
  enter(link, input, entered, "allgather");
  for (int k = 1; k < n; ++k) {
    const auto p = static_cast<size_t>((r + k) % n);
    const size_t bytes = counts[p] * elemSize;
    if (bytes == 0) continue;
    if (char* mapped = link.peerMapped(static_cast<int>(p), bytes, "allgather")) {
      std::memcpy(out + offs[p] * elemSize, mapped, bytes);
    } else {
      link.peerRead(static_cast<int>(p), link.peerBuffer(static_cast<int>(p), 0),
                    out + offs[p] * elemSize, bytes, "allgather");
    }
  }
  const auto me = static_cast<size_t>(r);
  char* own = out + offs[me] * elemSize;
  if (counts[me] > 0 && own != input) std::memmove(own, input, counts[me] * elemSize);
  link.step("allgather");
}

void broadcastSingleCopy(ShmLink& link, void* data, size_t bytes, int root, bool entered) {
  enter(link, data, entered, "broadcast");
  if (link.rank() != root) {
    if (char* mapped = link.peerMapped(root, bytes, "broadcast")) std::memcpy(data, mapped, bytes);
    else link.peerRead(root, link.peerBuffer(root, 0), data, bytes, "broadcast");
  }
  link.step("broadcast");
}

size_t cmaChunkBytes(size_t requested, int ranks, size_t l2Bytes) {
  constexpr size_t kPage = 4 << 10, kLo = 16 << 10, kHi = 4 << 20;
  size_t bytes = requested;
  if (bytes == 0)
    bytes = l2Bytes == 0 ? size_t{256} << 10 : l2Bytes / 2 / size_t(std::max(ranks, 1));
  return std::clamp(bytes / kPage * kPage, kLo, kHi);
}

size_t l2CacheBytes() {
  const long bytes = ::sysconf(_SC_LEVEL2_CACHE_SIZE);
  return bytes > 0 ? size_t(bytes) : 0;
}

}  // namespace ds::comm::shm_impl
