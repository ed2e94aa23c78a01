// The environment knobs zero reads (the CPU Adam kernel, the NVMe swap files' I/O path).
// Declarations only: read them with core/knobs.h's accessors.
#pragma once

#include "core/knobs.h"

// Declarations name only the fields they set (designated initializers; the rest keep their
// defaults), which GCC's -Wmissing-field-initializers would flag.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace ds::knobs {

// zero/cpu_adam.cc
inline constexpr Knob kCpuAdamIsa{
    .name = "DS_CPU_ADAM_ISA",
    .type = KnobType::kChoice,
    .doc =
        "CPU Adam kernel: scalar, avx2 or avx512; one this CPU lacks is an error. Unset or "
        "empty: the best this CPU supports.",
    .readBy = kReadByDsrt,
    .choices = "scalar|avx2|avx512"};

// zero/async_file.cc
inline constexpr Knob kZeroNoUring{
    .name = "DS_ZERO_NO_URING",
    .type = KnobType::kBool,
    .dflt = "0",
    .doc = "1: NVMe swap files use the pread/pwrite thread even where io_uring works.",
    .readBy = kReadByDsrt};

inline constexpr const Knob* kZeroKnobList[] = {&kCpuAdamIsa, &kZeroNoUring};
inline constexpr KnobTable kZeroKnobs{"zero", kZeroKnobList};

}  // namespace ds::knobs

#pragma GCC diagnostic pop
