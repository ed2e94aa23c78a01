// BatchScheduler: continuous batching for `dsrt serve`. Requests wait in a bounded queue; between
// decode steps, waiting requests take free KV-cache slots (each is prefilled with one forward of
// its prompt), then every running request gets one token from one batched forward. A finished or
// cancelled request frees its slot for the next step. Invariant: a request's tokens depend only
// on its own prompt, sampling parameters and seed (its draws come from its own stream, seeded as
// `dsrt generate` seeds a single prompt), never on what it was batched with.
// Tensor-parallel (options.link): every Decoder call is first sent to the follower ranks
// (decode_link.h), slot resets riding along with the next forward, so their caches stay in step.
// Thread-safety: submit(), cancel() and the counts from any thread; step() and drainQueue() on
// one thread (the decode loop), which is also where the sink is called.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "runtime/data/rng.h"
#include "runtime/inference/decoder.h"
#include "runtime/inference/inference_model.h"
#include "runtime/inference/sampler.h"
#include "runtime/serve/decode_link.h"

namespace ds::runtime::serve {

struct BatchJob {
  uint64_t id = 0;
  std::vector<int32_t> prompt;  // checked by the caller: non-empty, within context and vocab
  int maxTokens = 16;
  SamplingParams sampling;
  uint64_t seed = 0;
  std::vector<int32_t> stop;  // generating one ends the job (kept as its last token)
};

// One step's news for one job: a new token (token >= 0) and/or its end (finish non-empty:
// "length" for max_tokens or the model's context, "stop" for a stop token).
struct BatchEvent {
  uint64_t id = 0;
  int32_t token = -1;
  std::string finish;
  int promptTokens = 0, completionTokens = 0;
};

struct BatchSchedulerOptions {
  int maxBatch = 8;   // KV-cache slots: requests decoded together
  int maxQueue = 64;  // requests waiting for a slot; beyond, submit() refuses
  // Tensor-parallel serving: the link to the follower ranks (the model is this rank's shard); the
  // scheduler runs on rank 0 only. Null: one rank.
  DecodeLink* link = nullptr;
};

class BatchScheduler {
 public:
  using Sink = std::function<void(const BatchEvent&)>;
  BatchScheduler(const InferenceModel& model, const BatchSchedulerOptions& opts, Sink sink);
  ~BatchScheduler();

  // Queues job; false when maxQueue jobs already wait.
  bool submit(BatchJob job);
  // Drops job id (waiting or running) before the next step; no more events for it.
  void cancel(uint64_t id);
  // Admits waiting jobs into free slots and runs one decode step; false when there was nothing
  // to do. Exceptions from the model propagate (a bug, not a client's fault).
  bool step();
  // Waits until a job is queued, wake() is called, or timeout passes.
  void waitForWork(std::chrono::milliseconds timeout);
  void wake();
  // Removes every waiting job and returns their ids (shutdown).
  std::vector<uint64_t> drainQueue();
  int waiting() const;
  int running() const;

 private:
  struct Active;
  void applyCancels();
  void admit();
  void accept(Active& a, const float* logits);
  void resetSlot(size_t slot);
  void forward(const std::vector<int>& slots, const std::vector<int32_t>& tokens,
               const std::vector<bool>& logitRows);

  const InferenceModel& model_;
  BatchSchedulerOptions opts_;
  Sink sink_;
  Decoder decoder_;
  std::vector<std::unique_ptr<Active>> slots_;  // [maxBatch]; null = free (decode thread)
  std::vector<float> logits_;
  std::vector<int32_t> pendingResets_;  // tensor-parallel: sent with the next forward
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<BatchJob> queue_;    // guarded by mu_
  std::set<uint64_t> cancelled_;  // guarded by mu_
  int running_ = 0;               // guarded by mu_
  bool woken_ = false;            // guarded by mu_
};

}  // namespace ds::runtime::serve
