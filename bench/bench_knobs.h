// The environment knobs the bench programs read themselves (they also read the knobs of the
// libraries they link, listed with dsrt's). Declarations only, header-only because every
// bench/*.cc is a program of its own: read them with core/knobs.h's accessors.
#pragma once

#include "core/knobs.h"

// Declarations name only the fields they set (designated initializers; the rest keep their
// defaults), which GCC's -Wmissing-field-initializers would flag.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace ds::knobs {

// bench/raw_timing.h
inline constexpr Knob kBenchTargetSeconds{
    .name = "DS_BENCH_TARGET_SECONDS",
    .type = KnobType::kSeconds,
    .dflt = "0.5",
    .doc =
        "Raw-library peers (bench_raw_gloo, bench_raw_mpi) and bench_mem_probe: time each row "
        "for about this long, as dsrt comm-bench --target_seconds.",
    .readBy = kReadByBench,
    .lo = 0};

// bench/raw_mpi.cc
inline constexpr Knob kRawMpiThread{
    .name = "DS_RAW_MPI_THREAD",
    .type = KnobType::kChoice,
    .dflt = "multiple",
    .doc =
        "bench_raw_mpi: single initializes with plain MPI_Init, multiple with "
        "MPI_THREAD_MULTIPLE (as the mpi backend).",
    .readBy = kReadByBench,
    .choices = "single|multiple"};

inline constexpr const Knob* kBenchKnobList[] = {&kBenchTargetSeconds, &kRawMpiThread};
inline constexpr KnobTable kBenchKnobs{"bench", kBenchKnobList};

}  // namespace ds::knobs

#pragma GCC diagnostic pop
