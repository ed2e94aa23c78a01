// BatchScheduler (see batch_scheduler.h).
#include "runtime/serve/batch_scheduler.h"

#include <algorithm>

#include "core/error.h"

namespace ds::runtime::serve {

struct BatchScheduler::Active {
  BatchJob job;
  Sampler sampler;
  SplitMix64 rng;
  int32_t last = -1;
  int generated = 0;
  bool done = false;
  explicit Active(BatchJob j)
      : job(std::move(j)),
        sampler(job.sampling),
        // generate() seeds prompt p with seed * golden + p + 1; a request is prompt 0.
        rng(job.seed * 0x9E3779B97F4A7C15ull + 1) {}
};

BatchScheduler::BatchScheduler(const InferenceModel& model, const BatchSchedulerOptions& opts,
                               Sink sink)
    : model_(model),
      opts_(opts),
      sink_(std::move(sink)),
      decoder_(model, opts.maxBatch,
               DecoderOptions{.group = opts.link ? &opts.link->group() : nullptr}),
      slots_(static_cast<size_t>(opts.maxBatch)),
      logits_(static_cast<size_t>(model.vocab()) * static_cast<size_t>(opts.maxBatch)) {
  DS_CHECK(opts.maxBatch >= 1 && opts.maxQueue >= 0, "bad BatchSchedulerOptions");
}

BatchScheduler::~BatchScheduler() = default;

bool BatchScheduler::submit(BatchJob job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (static_cast<int>(queue_.size()) >= opts_.maxQueue) return false;
    cancelled_.erase(job.id);
    queue_.push_back(std::move(job));
  }
  cv_.notify_all();
  return true;
}

void BatchScheduler::cancel(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  cancelled_.insert(id);
}

void BatchScheduler::wake() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    woken_ = true;
  }
  cv_.notify_all();
}

void BatchScheduler::waitForWork(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return woken_ || !queue_.empty() || running_ > 0; });
  woken_ = false;
}

std::vector<uint64_t> BatchScheduler::drainQueue() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<uint64_t> ids;
  for (const auto& j : queue_) ids.push_back(j.id);
  queue_.clear();
  return ids;
}

int BatchScheduler::waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(queue_.size());
}

int BatchScheduler::running() const {
  std::lock_guard<std::mutex> lock(mu_);
  return running_;
}

void BatchScheduler::applyCancels() {
  std::lock_guard<std::mutex> lock(mu_);
  if (cancelled_.empty()) return;
  std::erase_if(queue_, [&](const BatchJob& j) { return cancelled_.count(j.id) > 0; });
  for (size_t s = 0; s < slots_.size(); ++s) {
    if (slots_[s] && cancelled_.count(slots_[s]->job.id)) {
      slots_[s].reset();
      resetSlot(s);
      --running_;
    }
  }
  cancelled_.clear();
}

void BatchScheduler::accept(Active& a, const float* logits) {
  const int32_t tok = a.sampler.next(logits, model_.vocab(), a.rng);
  a.last = tok;
  ++a.generated;
  BatchEvent ev{a.job.id, tok, {}, static_cast<int>(a.job.prompt.size()), a.generated};
  const int slot = static_cast<int>(
      std::find_if(slots_.begin(), slots_.end(), [&](const auto& p) { return p.get() == &a; }) -
      slots_.begin());
  if (std::find(a.job.stop.begin(), a.job.stop.end(), tok) != a.job.stop.end()) ev.finish = "stop";
  else if (a.generated >= a.job.maxTokens) ev.finish = "length";
  else if (decoder_.length(slot) >= model_.config().seqLen) ev.finish = "length";  // context
  a.done = !ev.finish.empty();
  sink_(ev);
}

void BatchScheduler::resetSlot(size_t slot) {
  decoder_.reset(static_cast<int>(slot));
  if (opts_.link != nullptr) pendingResets_.push_back(static_cast<int32_t>(slot));
}

void BatchScheduler::forward(const std::vector<int>& slots, const std::vector<int32_t>& tokens,
                             const std::vector<bool>& logitRows) {
  if (opts_.link != nullptr) {
    DecodeOp op;
    op.kind = DecodeOp::kForward;
    op.resets.swap(pendingResets_);
    op.slots.assign(slots.begin(), slots.end());
    op.tokens = tokens;
    op.logitRows = logitRows;
    opts_.link->send(op);
  }
  decoder_.forward(slots.data(), tokens.data(), static_cast<int>(slots.size()), logitRows,
                   logits_.data());
}

void BatchScheduler::admit() {
  for (size_t s = 0; s < slots_.size(); ++s) {
    if (slots_[s]) continue;
    std::optional<BatchJob> job;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (queue_.empty()) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    if (job->maxTokens == 0) {
      sink_({job->id, -1, "length", static_cast<int>(job->prompt.size()), 0});
      --s;  // the slot is still free
      continue;
    }
    slots_[s] = std::make_unique<Active>(std::move(*job));
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++running_;
    }
    Active& a = *slots_[s];
    resetSlot(s);
    const auto& ids = a.job.prompt;
    const std::vector<int> rowSlots(ids.size(), static_cast<int>(s));
    std::vector<bool> rows(ids.size(), false);
    rows.back() = true;
    forward(rowSlots, ids, rows);
    accept(a, logits_.data());
  }
}

bool BatchScheduler::step() {
  applyCancels();
  admit();
  std::vector<int> slots;
  std::vector<int32_t> toks;
  for (size_t s = 0; s < slots_.size(); ++s) {
    if (slots_[s] && !slots_[s]->done) {
      slots.push_back(static_cast<int>(s));
      toks.push_back(slots_[s]->last);
    }
  }
  if (!slots.empty()) {
    forward(slots, toks, {});
    const size_t V = static_cast<size_t>(model_.vocab());
    for (size_t i = 0; i < slots.size(); ++i)
      accept(*slots_[static_cast<size_t>(slots[i])], logits_.data() + i * V);
  }
  bool any = !slots.empty();
  for (size_t s = 0; s < slots_.size(); ++s) {
    if (slots_[s] && slots_[s]->done) {
      slots_[s].reset();
      any = true;
      std::lock_guard<std::mutex> lock(mu_);
      --running_;
    }
  }
  return any;
}

}  // namespace ds::runtime::serve
