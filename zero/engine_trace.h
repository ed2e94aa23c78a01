// Tracer: the engine's diagnostics trace (TraceEvent, declared in zero_engine.h): a push_back on
// the training thread after enable(true), nothing otherwise. Not a profiler and not
// thread-safe. Invariant: events are kept in the order the training thread noted them.
#pragma once

#include <cstdint>
#include <vector>

#include "zero/zero_engine.h"

namespace ds::zero {

class Tracer {
 public:
  void enable(bool enabled) { enabled_ = enabled; }
  bool enabled() const { return enabled_; }
  void note(TraceEvent::Kind kind, int64_t eventId, bool completedBeforeWait = false,
            bool allreduce = false) {
    if (enabled_) events_.push_back({kind, eventId, completedBeforeWait, allreduce});
  }
  std::vector<TraceEvent> take() {
    std::vector<TraceEvent> taken;
    taken.swap(events_);
    return taken;
  }

 private:
  bool enabled_ = false;
  std::vector<TraceEvent> events_;
};

}  // namespace ds::zero
