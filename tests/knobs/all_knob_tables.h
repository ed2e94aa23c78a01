// Every component's knob table, in docs/knobs.md's order: what the registry tests check and the
// generator (knobs_doc.cc) renders. A component that gains a *_knobs.h adds its table here.
#pragma once

#include "bench/bench_knobs.h"
#include "comm/comm_knobs.h"
#include "core/core_knobs.h"
#include "launcher/launcher_knobs.h"
#include "runtime/tensor/tensor_knobs.h"
#include "zero/zero_knobs.h"

namespace ds::test {

inline constexpr KnobTable kAllKnobTables[] = {
    knobs::kCoreKnobs,    knobs::kCommKnobs,     knobs::kZeroKnobs,
    knobs::kRuntimeKnobs, knobs::kLauncherKnobs, knobs::kBenchKnobs,
};

}  // namespace ds::test
