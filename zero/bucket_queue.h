// BucketQueue: the gradient buckets every stage reduces through: one or two bucket slots
// (overlap_comm) with their input/output buffers, and the in-flight reductions in issue order,
// each with the work to run once it completes. Not the choice of what goes in a bucket (the
// stages decide) and not thread-safe. Invariant: buckets are waited for in the order they were
// issued; without overlap_comm every bucket is waited for as soon as it is issued.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <vector>

#include "comm/work.h"
#include "zero/engine_trace.h"
#include "zero/zero_engine.h"

namespace ds::zero {

class BucketQueue {
 public:
  BucketQueue(Tracer& tracer, bool overlapComm);

  // Per slot: an input buffer of inElems and an output buffer of outElems elements.
  void allocate(size_t inElems, size_t outElems);
  std::vector<float>& input(int slot) { return input_[size_t(slot)]; }
  std::vector<float>& output(int slot) { return output_[size_t(slot)]; }

  // A free slot, now marked busy; waits for the oldest bucket in flight when all are busy.
  int acquire();
  // Frees a slot acquired for a bucket that is not issued after all (one rank: nothing to reduce).
  void release(int slot) { busy_[size_t(slot)] = 0; }
  // Records an issued bucket (slot -1: none) and, without overlap_comm, waits for everything.
  // finish (may be empty) runs after the work completed; the slot is freed after it.
  void issue(comm::WorkPtr work, std::function<void()> finish, int slot, bool allreduce = false);
  void drainOne();
  void drainAll();

  void addPipeline(PipelineState& state) const;
  size_t bufferBytes() const;  // the slots' buffers

 private:
  struct Pending {
    comm::WorkPtr work;
    std::function<void()> finish;
    int slot;
    int64_t number;
  };
  Tracer& tracer_;
  bool overlap_;
  int64_t nextNumber_ = 0;  // buckets are numbered per engine from 0
  std::deque<Pending> pending_;
  std::vector<std::vector<float>> input_, output_;
  std::vector<char> busy_;
  int nextSlot_ = 0;
};

}  // namespace ds::zero
