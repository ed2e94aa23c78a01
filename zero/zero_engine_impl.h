// ZeroEngine::Impl: the state of one rank's engine (internal to zero/). zero_engine.cc holds
// construction, parameter I/O, step, memory and checkpoint; zero_hooks.cc holds the per-block
// hooks, gradient buckets and stage-3 gather/release. Single-threaded: the training thread calls
// everything; collectives run asynchronously inside the ProcessGroup backend.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "zero/dp_comm.h"
#include "zero/optimizer_partition.h"
#include "zero/param_swap.h"
#include "zero/partition.h"
#include "zero/zero_engine.h"

namespace ds::zero {

struct ZeroEngine::Impl {
  Impl(std::vector<ParamInfo> params, int numBlocks, comm::ProcessGroup* group, ZeroOptions z,
       OptimizerOptions o);

  // --- static description ---
  std::vector<ParamInfo> params;
  int numBlocks;
  DpComm comm;
  ZeroOptions z;
  OptimizerOptions o;
  int world, rank;
  bool bf16;
  size_t numel;
  std::vector<size_t> off;                       // flat offset of each param
  std::vector<int> lowest;                       // lowest block using each param
  std::vector<std::vector<size_t>> blockParams;  // params used by each block
  std::vector<std::vector<size_t>> completeAt;   // params whose grad completes after block b

  ParamTable table;

  // --- stages 0-2: full flat model params and (stage 0/1) full grads, padded ---
  std::unique_ptr<FlatLayout> flat;
  std::vector<float> full32;
  std::vector<uint16_t> full16;
  std::vector<float> fullGrad;
  // Stage 1/2 param allgather: in place over the full buffer when allgather_bucket_size covers
  // the whole partition; else in chunks of agChunk elements per rank through agStage.
  size_t agChunk = 0;
  std::vector<uint16_t> agStage;      // agChunk * world elements of the model dtype

  // --- stage 3 ---
  std::unique_ptr<Stage3Layout> s3;
  std::vector<float> part32;          // param partition (fp32 compute)
  std::vector<uint16_t> part16;       // param partition (bf16 compute)
  std::unique_ptr<ParamSwap> pswap;   // offload_param nvme: the partition lives here instead
  std::vector<std::vector<float>> live32;     // gathered full params (chunk*world elems)
  std::vector<std::vector<uint16_t>> live16;
  std::vector<comm::WorkPtr> gatherWork;      // in-flight gather per param (null when local)
  std::vector<char> gathering;                // gather issued, not yet waited
  std::vector<char> persistent;
  size_t liveElems = 0, peakLiveElems = 0;    // non-persistent gathered elements

  // Freed transient buffers (per-parameter grads, stage-3 gathered params) kept by size for
  // reuse: fresh pages for every block of every step cost more than the collectives (page
  // faults + zeroing). Pool + live never exceed the peak already reported under buffers.
  std::multimap<size_t, std::vector<float>> pool32;
  std::multimap<size_t, std::vector<uint16_t>> pool16;

  // --- stage 2/3 gradients ---
  std::vector<std::vector<float>> pgrad;      // transient full grads per param (backward)
  size_t pgradElems = 0, peakPgradElems = 0;
  std::vector<float> gradPart;                // Lp, accumulated over micro-steps

  // --- optimizer partition: local [0, Lp) <-> flat ranges ---
  struct Range { size_t flatOff, localOff, size; };
  std::vector<Range> ranges;
  size_t Lp = 0;          // local partition length
  size_t optCount = 0;    // elements the optimizer updates (prefix of [0, Lp))
  size_t partStart = 0;   // stages 0-2: flat offset of local index 0
  std::unique_ptr<OptimizerPartition> opt;
  int64_t steps = 0;

  // --- gradient buckets ---
  struct Pending { comm::WorkPtr work; std::function<void()> finish; int slot; int64_t id; };
  int64_t bucketSeq = 0;
  std::deque<Pending> pending;
  std::vector<std::vector<float>> bucketIn, bucketOut;
  std::vector<char> slotBusy;
  int nextSlot = 0;
  size_t bucketElems = 0;
  // stages 0-2: reduction frontier over the padded flat space; [lo, hi) complete, not reduced
  std::vector<char> complete;
  size_t lo = 0, hi = 0;
  bool lastMicro = true;
  bool reduceNow() const { return z.stage >= 2 || lastMicro; }
  // stage 3: params queued for the next reduce-scatter bucket
  std::vector<size_t> s3Bucket;
  size_t s3BucketElems = 0;

  // --- diagnostics ---
  bool tracing = false;
  std::vector<TraceEvent> trace;
  void note(TraceEvent::Kind k, int64_t id, bool early = false, bool allreduce = false) {
    if (tracing) trace.push_back({k, id, early, allreduce});
  }
  void pushBucket(comm::WorkPtr w, std::function<void()> fin, int slot, bool allreduce = false) {
    note(TraceEvent::Kind::kBucketIssued, bucketSeq, false, allreduce);
    pending.push_back({std::move(w), std::move(fin), slot, bucketSeq++});
  }

  // zero_hooks.cc
  void resetMicroStep();
  int acquireSlot();
  void drainOne();
  void drainAll();
  void markComplete(int block);
  void advanceFrontier(bool final);
  void emitFlat(size_t a, size_t b);
  void queueS3(size_t p);
  void flushS3();
  void allocGrads(int block);
  void ensureGathered(size_t p);
  void waitGathered(size_t p);
  void prefetch(int block);
  void readAhead(int block);
  void readSwap(size_t p, size_t offset, size_t n, void* dst);
  void release(size_t p);
  void releaseAfter(int block, int nextBlock);
  void finishBackwardGrads();

  // zero_engine.cc
  void buildOptimizer();
  void refreshModelParams();   // after the optimizer or a load: model params from the master
  void gatherPersistent();
  // Stage 3: writes local partition elements [off, off+n) from fp32 values (converted to the
  // model dtype) into part32/part16 or the nvme swap.
  void partWrite(size_t off, size_t n, const float* src);
  MemoryReport memory() const;
};

}  // namespace ds::zero
