// ZeroEngine's per-block work: gradient buckets (allreduce for stage 0, reduce-scatter for 1-3 or
// allreduce with reduce_scatter=false at stages 1/2, issued as blocks finish backward; with overlap_comm two bucket slots are in flight while
// backward continues), stage-3 parameter gather / prefetch / release, the offload_param nvme
// read-ahead (the swap reads of the block after the prefetched one run while the current block
// computes), and the diagnostics trace.
#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "zero/zero_engine_impl.h"

namespace ds::zero {
namespace {

// dst = a buffer of n elements from the pool (zeroed when asked) or a fresh zeroed one.
template <typename T>
void takeBuffer(std::multimap<size_t, std::vector<T>>& pool, std::vector<T>& dst, size_t n,
                bool zero) {
  auto it = pool.find(n);
  if (it == pool.end()) {
    dst.assign(n, T(0));
    return;
  }
  dst = std::move(it->second);
  pool.erase(it);
  if (zero) std::fill(dst.begin(), dst.end(), T(0));
}

template <typename T>
void giveBuffer(std::multimap<size_t, std::vector<T>>& pool, std::vector<T>& v) {
  if (v.empty()) return;
  const size_t n = v.size();
  pool.emplace(n, std::move(v));
  v = std::vector<T>();
}

}  // namespace

void ZeroEngine::Impl::resetMicroStep() {
  std::fill(complete.begin(), complete.end(), 0);
  if (flat) lo = hi = flat->padded();
}

// A free bucket slot; waits for the oldest in-flight bucket when all are busy.
int ZeroEngine::Impl::acquireSlot() {
  for (;;) {
    for (size_t k = 0; k < slotBusy.size(); ++k) {
      int s = (nextSlot + int(k)) % int(slotBusy.size());
      if (!slotBusy[size_t(s)]) {
        nextSlot = (s + 1) % int(slotBusy.size());
        return s;
      }
    }
    drainOne();
  }
}

void ZeroEngine::Impl::drainOne() {
  DS_CHECK(!pending.empty());
  Pending p = std::move(pending.front());
  pending.pop_front();
  note(TraceEvent::Kind::kBucketWaited, p.id, !p.work || p.work->isCompleted());
  waitWork(p.work);
  if (p.finish) p.finish();
  if (p.slot >= 0) slotBusy[size_t(p.slot)] = 0;
}

void ZeroEngine::Impl::drainAll() {
  while (!pending.empty()) drainOne();
}

void ZeroEngine::Impl::markComplete(int block) {
  for (size_t p : completeAt[size_t(block)]) complete[p] = 1;
}

// Stages 0-2: extend [lo, hi) downward over completed params, emit full buckets from the top.
void ZeroEngine::Impl::advanceFrontier(bool final) {
  const size_t B = bucketElems;
  if (final) {
    lo = 0;
  } else {
    for (;;) {
      // the param ending at lo (params are laid out in order; padding sits above numel)
      if (lo == 0) break;
      size_t q = size_t(std::upper_bound(off.begin(), off.end(), lo - 1) - off.begin()) - 1;
      if (lo > numel) {  // the padding tail counts as complete
        lo = numel;
        continue;
      }
      if (!complete[q]) break;
      lo = off[q];
    }
  }
  while (hi > lo && (hi - lo >= B || final)) {
    size_t a = hi >= B ? std::max(lo, hi - B) : lo;
    emitFlat(a, hi);
    hi = a;
  }
}

void ZeroEngine::Impl::emitFlat(size_t a, size_t b) {
  const size_t n = b - a;
  if (z.stage == 0) {
    auto w = comm.allreduceSum(fullGrad.data() + a, n);
    pushBucket(w, nullptr, -1, true);
  } else {
    const Shard mine = intersect({a, n}, flat->paddedShard(rank));
    const auto counts = flat->counts({a, n});
    int slot = acquireSlot();
    slotBusy[size_t(slot)] = 1;
    float* out = bucketOut[size_t(slot)].data();
    const float* in = nullptr;
    if (z.stage == 1) {
      in = fullGrad.data() + a;
    } else {  // stage 2: copy the completed params' grads into the contiguous bucket
      float* buf = bucketIn[size_t(slot)].data();
      std::memset(buf, 0, n * sizeof(float));
      size_t q = size_t(std::upper_bound(off.begin(), off.end(), a) - off.begin()) - 1;
      for (; q < params.size() && off[q] < b; ++q) {
        Shard s = intersect({a, n}, {off[q], params[q].numel});
        if (s.size && !pgrad[q].empty())
          std::memcpy(buf + (s.offset - a), pgrad[q].data() + (s.offset - off[q]),
                      s.size * sizeof(float));
        if (off[q] >= a && !pgrad[q].empty()) {  // fully emitted: free it
          pgradElems -= pgrad[q].size();
          giveBuffer(pool32, pgrad[q]);
          table.grad[q] = nullptr;
        }
      }
      in = buf;
    }
    if (!z.reduceScatter) {  // allreduce the bucket in place; keep this rank's slice
      float* buf = z.stage == 1 ? fullGrad.data() + a : bucketIn[size_t(slot)].data();
      auto w = comm.allreduceSum(buf, n);
      std::function<void()> fin;
      if (z.stage == 2 && mine.size)
        fin = [this, buf, src = mine.offset - a, dst = mine.offset - partStart, sz = mine.size] {
          float* g = gradPart.data() + dst;
          for (size_t i = 0; i < sz; ++i) g[i] += buf[src + i];
        };
      pushBucket(w, fin, slot, true);
      if (!z.overlapComm) drainAll();
      return;
    }
    auto w = comm.reduceScatterSum(in, out, counts);
    std::function<void()> fin;
    if (mine.size) {
      const size_t dst = mine.offset - partStart;
      if (z.stage == 1) {
        fin = [this, out, dst, sz = mine.size] {
          std::memcpy(fullGrad.data() + partStart + dst, out, sz * sizeof(float));
        };
      } else {
        fin = [this, out, dst, sz = mine.size] {
          float* g = gradPart.data() + dst;
          for (size_t i = 0; i < sz; ++i) g[i] += out[i];
        };
      }
    }
    pushBucket(w, fin, slot);
  }
  if (!z.overlapComm) drainAll();
}

// Stage 3: gradients are reduce-scattered per parameter (each padded to chunk*world, rank-major),
// coalesced into buckets of reduce_bucket_size elements.
void ZeroEngine::Impl::queueS3(size_t p) {
  const size_t need = s3->chunk(p) * size_t(world);
  if (!s3Bucket.empty() && s3BucketElems + need > bucketElems) flushS3();
  s3Bucket.push_back(p);
  s3BucketElems += need;
  if (s3BucketElems >= bucketElems) flushS3();
}

void ZeroEngine::Impl::flushS3() {
  if (s3Bucket.empty()) return;
  std::vector<size_t> ps;
  ps.swap(s3Bucket);
  const size_t total = s3BucketElems;
  s3BucketElems = 0;
  size_t per = total / size_t(world);
  int slot = acquireSlot();
  slotBusy[size_t(slot)] = 1;
  auto& in = bucketIn[size_t(slot)];
  auto& out = bucketOut[size_t(slot)];
  if (in.size() < total) in.resize(total);  // a single param larger than the bucket
  if (out.size() < per) out.resize(per);
  size_t pos = 0;
  for (int r = 0; r < world; ++r)
    for (size_t p : ps) {
      size_t c = s3->chunk(p);
      if (pgrad[p].empty()) std::memset(in.data() + pos, 0, c * sizeof(float));
      else std::memcpy(in.data() + pos, pgrad[p].data() + size_t(r) * c, c * sizeof(float));
      pos += c;
    }
  for (size_t p : ps) {
    pgradElems -= pgrad[p].size();
    giveBuffer(pool32, pgrad[p]);
    table.grad[p] = nullptr;
  }
  auto w = comm.reduceScatterSum(in.data(), out.data(), std::vector<size_t>(size_t(world), per));
  float* o = out.data();
  auto fin = [this, ps, o] {
    size_t q = 0;
    for (size_t p : ps) {
      float* g = gradPart.data() + s3->localOffset(p);
      for (size_t i = 0, c = s3->chunk(p); i < c; ++i) g[i] += o[q + i];
      q += s3->chunk(p);
    }
  };
  pushBucket(w, fin, slot);
  if (!z.overlapComm) drainAll();
}

// Stage 2/3: zeroed full-size gradient buffers for the block's params not yet allocated.
void ZeroEngine::Impl::allocGrads(int block) {
  if (z.stage < 2) return;
  for (size_t p : blockParams[size_t(block)]) {
    if (!pgrad[p].empty()) continue;
    size_t n = z.stage == 3 ? s3->chunk(p) * size_t(world) : params[p].numel;
    takeBuffer(pool32, pgrad[p], n, true);
    pgradElems += n;
    peakPgradElems = std::max(peakPgradElems, pgradElems);
    table.grad[p] = pgrad[p].data();
  }
}

// Called when backward is over (afterBackward of block 0, or step as a fallback).
void ZeroEngine::Impl::finishBackwardGrads() {
  if (!reduceNow()) return;
  if (z.stage == 3) {
    flushS3();  // queued params are freed by the flush, so the loop below sees only leftovers
    for (size_t p = 0; p < params.size(); ++p)
      if (!pgrad[p].empty()) queueS3(p);
    flushS3();
  } else if (hi > 0) {
    advanceFrontier(true);
  }
}

// --- stage 3 parameters ---

void ZeroEngine::Impl::ensureGathered(size_t p) {
  if (table.value[p] || table.value16[p] || gathering[p]) return;
  const size_t c = s3->chunk(p), full = c * size_t(world);
  const std::vector<size_t> counts(size_t(world), c);
  comm::WorkPtr w;
  const size_t lo = s3->localOffset(p), mine = size_t(rank) * c;
  if (bf16) {
    takeBuffer(pool16, live16[p], full, false);  // the allgather writes every element
    const uint16_t* in = part16.data() + lo;
    if (pswap) {  // read this rank's chunk straight into its block: an in-place allgather
      readSwap(p, lo * 2, c * 2, live16[p].data() + mine);
      in = live16[p].data() + mine;
    }
    w = comm.allgather(in, live16[p].data(), counts, z.compute);
  } else {
    takeBuffer(pool32, live32[p], full, false);
    const float* in = part32.data() + lo;
    if (pswap) {
      readSwap(p, lo * 4, c * 4, live32[p].data() + mine);
      in = live32[p].data() + mine;
    }
    w = comm.allgather(in, live32[p].data(), counts, DType::kF32);
  }
  gatherWork[p] = w;
  gathering[p] = 1;
  note(TraceEvent::Kind::kGatherIssued, int64_t(p));
  if (!persistent[p]) {
    liveElems += full;
    peakLiveElems = std::max(peakLiveElems, liveElems);
  }
}

// offload_param nvme: p's bytes from its read-ahead when one was submitted, else read now.
void ZeroEngine::Impl::readSwap(size_t p, size_t offset, size_t n, void* dst) {
  if (pswap->pending(p)) {
    note(TraceEvent::Kind::kSwapReadWaited, int64_t(p), tracing && pswap->aheadCompleted(p));
    if (pswap->take(p, offset, n, dst)) return;
  }
  pswap->read(offset, n, dst);
}

// offload_param nvme: submits the swap reads of `block`'s parameters that are neither gathered
// nor being gathered, so that their gather later finds the bytes already read (the read runs
// while the current block computes).
void ZeroEngine::Impl::readAhead(int block) {
  if (!pswap || block < 0 || block >= numBlocks) return;
  const size_t es = bf16 ? 2 : 4;
  for (size_t p : blockParams[size_t(block)]) {
    if (persistent[p] || table.value[p] || table.value16[p] || gathering[p] || pswap->pending(p))
      continue;
    pswap->readAhead(p, s3->localOffset(p) * es, s3->chunk(p) * es);
    note(TraceEvent::Kind::kSwapReadIssued, int64_t(p));
  }
}

void ZeroEngine::Impl::waitGathered(size_t p) {
  if (!gathering[p]) return;
  note(TraceEvent::Kind::kGatherWaited, int64_t(p), !gatherWork[p] || gatherWork[p]->isCompleted());
  waitWork(gatherWork[p]);
  gatherWork[p] = nullptr;
  gathering[p] = 0;
  if (bf16) table.value16[p] = reinterpret_cast<const ds::bf16*>(live16[p].data());
  else table.value[p] = live32[p].data();
}

// Starts gathers for `block`'s params within the prefetch and live-parameter budgets.
void ZeroEngine::Impl::prefetch(int block) {
  if (block < 0 || block >= numBlocks) return;
  size_t budget = z.prefetchBucketSize;
  for (size_t p : blockParams[size_t(block)]) {
    if (table.value[p] || table.value16[p] || gathering[p]) continue;
    size_t full = s3->chunk(p) * size_t(world);
    if (full > budget || liveElems + full > z.maxLiveParameters) break;
    budget -= full;
    ensureGathered(p);
  }
}

void ZeroEngine::Impl::release(size_t p) {
  if (persistent[p]) return;
  if (gathering[p]) waitGathered(p);
  if (!table.value[p] && !table.value16[p]) return;
  note(TraceEvent::Kind::kReleased, int64_t(p));
  liveElems -= bf16 ? live16[p].size() : live32[p].size();
  giveBuffer(pool32, live32[p]);
  giveBuffer(pool16, live16[p]);
  table.value[p] = nullptr;
  table.value16[p] = nullptr;
}

// Releases `block`'s params unless the next block to run (nextBlock; -1 = none) uses them.
void ZeroEngine::Impl::releaseAfter(int block, int nextBlock) {
  for (size_t p : blockParams[size_t(block)]) {
    const auto& bs = params[p].blocks;
    if (nextBlock >= 0 && std::find(bs.begin(), bs.end(), nextBlock) != bs.end()) continue;
    release(p);
  }
}

// --- the hooks ---

void ZeroEngine::beforeForward(int block) {
  auto& m = *impl_;
  m.note(TraceEvent::Kind::kBeforeForward, block);
  DS_CHECK(block >= 0 && block < m.numBlocks, "beforeForward({}) of {} blocks", block,
           m.numBlocks);
  if (m.z.stage != 3) return;
  for (size_t p : m.blockParams[size_t(block)]) m.ensureGathered(p);
  m.prefetch(block + 1);
  m.readAhead(block + 1);  // what the prefetch left out
  m.readAhead(block + 2);  // taken by the next block's prefetch
  for (size_t p : m.blockParams[size_t(block)]) m.waitGathered(p);
}

void ZeroEngine::afterForward(int block) {
  auto& m = *impl_;
  m.note(TraceEvent::Kind::kAfterForward, block);
  if (m.z.stage != 3) return;
  // next use: the following block's forward, or this (last) block's backward
  m.releaseAfter(block, block + 1 < m.numBlocks ? block + 1 : block);
}

void ZeroEngine::beforeBackward(int block) {
  auto& m = *impl_;
  m.note(TraceEvent::Kind::kBeforeBackward, block);
  DS_CHECK(block >= 0 && block < m.numBlocks, "beforeBackward({}) of {} blocks", block,
           m.numBlocks);
  if (m.z.stage == 3) {
    for (size_t p : m.blockParams[size_t(block)]) m.ensureGathered(p);
    m.prefetch(block - 1);
    m.readAhead(block - 1);
    m.readAhead(block - 2);
    for (size_t p : m.blockParams[size_t(block)]) m.waitGathered(p);
  }
  m.allocGrads(block);
}

void ZeroEngine::afterBackward(int block) {
  auto& m = *impl_;
  m.note(TraceEvent::Kind::kAfterBackward, block);
  DS_CHECK(block >= 0 && block < m.numBlocks, "afterBackward({}) of {} blocks", block,
           m.numBlocks);
  if (m.z.stage == 3) {
    m.releaseAfter(block, block - 1);
    if (m.reduceNow())
      for (size_t p : m.completeAt[size_t(block)]) m.queueS3(p);
  } else if (m.reduceNow()) {
    m.markComplete(block);
    m.advanceFrontier(false);
  }
  if (block == 0) m.finishBackwardGrads();
}

}  // namespace ds::zero

namespace ds::zero {

void ZeroEngine::enableTrace(bool on) { impl_->tracing = on; }

std::vector<TraceEvent> ZeroEngine::takeTrace() {
  std::vector<TraceEvent> t;
  t.swap(impl_->trace);
  return t;
}

PipelineState ZeroEngine::pipeline() const {
  auto& m = *impl_;  // aheadCompleted() reaps I/O completions: not const
  PipelineState s;
  for (const auto& p : m.pending) {
    ++s.bucketsInFlight;
    if (!p.work || p.work->isCompleted()) ++s.bucketsCompletedInFlight;
  }
  for (size_t p = 0; p < m.gathering.size(); ++p)
    if (m.gathering[p]) {
      ++s.gathersInFlight;
      if (!m.gatherWork[p] || m.gatherWork[p]->isCompleted()) ++s.gathersCompletedInFlight;
    }
  s.liveElems = m.liveElems;
  s.peakLiveElems = m.peakLiveElems;
  if (m.pswap)
    for (size_t p = 0; p < m.params.size(); ++p)
      if (m.pswap->pending(p)) {
        ++s.swapReadsAhead;
        if (m.pswap->aheadCompleted(p)) ++s.swapReadsAheadCompleted;
      }
  return s;
}

bool ZeroEngine::gatherIssued(size_t p) const {
  const auto& m = *impl_;
  if (m.z.stage != 3 || p >= m.params.size()) return false;
  return m.gathering[p] || m.table.value[p] || m.table.value16[p];
}

}  // namespace ds::zero
