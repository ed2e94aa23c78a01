// OptimizerPartition: this rank's optimizer states (fp32 master, exp_avg, exp_avg_sq or
// momentum) over a local index space [0, n), kept in memory (device or cpu offload) or in NVMe
// swap files, and the tiled update (DeepSpeed's sub groups): in memory, tiles of sub_group_size
// (or the smaller updateTile()) one after the other, each tile's listener called before the next
// starts, so a caller can ship tile k while k+1 is updated; with NVMe, tile k+1 is read while
// tile k is updated and tile k-1 written back (buffer_count slots). Invariant: the tiling never
// changes a bit (every kernel is elementwise; norms and scales are decided before update()).
// Not the partitioning (the engine maps local indices to the flat space). Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "zero/async_file.h"
#include "zero/cpu_adam.h"
#include "zero/zero_engine.h"

namespace ds::zero {

// The NVMe swap tile (elements per state per slot): sub_group_size clamped to the partition and to
// what the I/O pipeline needs (2 Mi elements = 8 MiB per request), rounded up to 4 KiB.
size_t nvmeTileElems(size_t subGroupSize, size_t count);

class OptimizerPartition {
 public:
  // masterAlias: when non-null (in-memory only) the fp32 master IS that array (e.g. the model's
  // fp32 params), not a copy. offload.device: none | cpu | nvme.
  OptimizerPartition(size_t count, const OptimizerOptions& opt, const OffloadOptions& offload,
                     size_t subGroupSize, float* masterAlias, int rank);
  ~OptimizerPartition();

  size_t size() const { return size_; }
  // Where weight decay applies: sorted, disjoint local runs [begin, end). Every other element is
  // updated with weight decay 0 (biases, LayerNorm gains, padding). Never called: decay applies
  // everywhere. A run's elements get exactly the arithmetic they would get in one call over the
  // whole partition (the kernels are elementwise), so where the runs split nothing changes.
  struct Run {
    size_t begin = 0, end = 0;
  };
  void setDecayRuns(std::vector<Run> runs);
  const std::vector<std::string>& stateNames() const { return names_; }  // [0] is "fp32"
  // One state's array when the states are in memory (not nvme): the compressed optimizers
  // (onebit_adam.h) update them in place.
  float* stateData(size_t state);
  // Copies of a local range of one state (any place).
  void read(size_t state, size_t offset, size_t count, float* out);
  void write(size_t state, size_t offset, size_t count, const float* values);

  // One optimizer step over local [0, count) with grads grad[0..count). afterTile(off, cnt,
  // master) runs after each tile's update (master points at the tile's fp32 values), in order,
  // once per tile, the tiles covering [0, count) without overlap.
  void update(const float* grad, size_t count, float gradScale, float learningRate, int64_t step,
              Half16Out out16, const std::function<void(size_t, size_t, const float*)>& afterTile);

  // Lamb: the extents (local offset, size) of whole parameters, each with its own trust ratio.
  struct Segment {
    size_t offset = 0, size = 0;
    bool decay = true;  // weight decay applies (the parameter's ParamInfo::decay)
  };
  void setSegments(std::vector<Segment> segments) { segments_ = std::move(segments); }

  MemPlace place() const;
  size_t stateBytes() const;   // optimizer states held (master counted only when owned)
  size_t bufferBytes() const;  // nvme tile buffers
  bool masterOwned() const { return alias_ == nullptr; }
  int slots() const { return slots_; }        // nvme tile slots: max(3, buffer_count)
  size_t tileElems() const { return tile_; }  // nvme tile: sub_group_size rounded up to 1024
  // In memory: the update's tile, sub_group_size unless a smaller one is set (>= 1; Lamb, whose
  // trust ratios are per parameter, always runs in one pass). NVMe keeps its swap tile.
  void setUpdateTile(size_t elems);
  size_t updateTile() const { return memTile_; }

  // Diagnostics (tests): the nvme tile pipeline's events in order, recorded after
  // enableTrace(true); inFlight(): the tile I/Os submitted and not yet waited for, and whether
  // the file layer has finished each (the proof that I/O runs while a tile is updated).
  struct IoEvent {
    enum class Kind { kReadIssued, kReadWaited, kUpdated, kWriteIssued, kWriteWaited };
    Kind kind;
    size_t tile;
    bool completedBeforeWait = false;  // k*Waited: the I/O had finished before the wait
  };
  struct IoInFlight {
    size_t tile;
    bool write;
    bool completed;
  };
  void enableTrace(bool enabled) { tracing_ = enabled; }
  std::vector<IoEvent> takeTrace();
  std::vector<IoInFlight> inFlight();

 private:
  void openSwap(size_t subGroupSize, int rank);
  // One tile at local offset `first`: split into runs with and without decay.
  void stepTile(float* const* states, const float* grad, size_t first, size_t cnt, float gradScale,
                float learningRate, int64_t step, Half16Out out16);
  void stepLamb(float* const* states, const float* grad, size_t first, size_t cnt, float gradScale,
                float learningRate, int64_t step, Half16Out out16);
  void stepRun(float* const* states, const float* grad, size_t cnt, float gradScale,
               float learningRate, int64_t step, Half16Out out16, bool decay);
  void updateMemory(const float* grad, size_t count, float gradScale, float learningRate,
                    int64_t step, Half16Out out16,
                    const std::function<void(size_t, size_t, const float*)>& afterTile);
  void updateNvme(const float* grad, size_t count, float gradScale, float learningRate,
                  int64_t step, Half16Out out16,
                  const std::function<void(size_t, size_t, const float*)>& afterTile);

  size_t size_;
  OptimizerOptions opt_;
  OffloadOptions offload_;
  std::vector<std::string> names_;
  std::vector<Segment> segments_;  // Lamb's parameters
  float* alias_;
  bool decayAll_ = true;
  std::vector<Run> decayRuns_;
  std::vector<std::vector<float>> mem_;            // per state (mem_[0] empty when aliased)
  std::vector<std::unique_ptr<AsyncFile>> files_;  // per state (nvme)
  size_t tile_ = 0;                                // elements per nvme tile (multiple of 1024)
  size_t subGroup_ = 0;                            // sub_group_size
  size_t memTile_ = 0;                             // elements per in-memory update tile
  int slots_ = 3;
  std::vector<AlignedBuffer> slotBuf_;  // [slot * states + state]
  // nvme update in progress: tickets per [slot * states + state] (0 = none), tile per slot
  std::vector<uint64_t> readT_, writeT_;
  std::vector<size_t> readTile_, writeTile_;
  bool tracing_ = false;
  std::vector<IoEvent> trace_;
  void note(IoEvent::Kind kind, size_t tile, bool early = false) {
    if (tracing_) trace_.push_back({kind, tile, early});
  }
  bool slotDone(const std::vector<uint64_t>& tickets, size_t slot);
};

}  // namespace ds::zero
