// The environment knobs runtime reads (the bf16 linear-layer path). Declarations only: read
// them with core/knobs.h's accessors.
#pragma once

#include "core/knobs.h"

// Declarations name only the fields they set (designated initializers; the rest keep their
// defaults), which GCC's -Wmissing-field-initializers would flag.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace ds::knobs {

// runtime/tensor/matmul_bf16.cc
inline constexpr Knob kBf16Linear{
    .name = "DS_BF16_LINEAR",
    .type = KnobType::kChoice,
    .dflt = "auto",
    .doc =
        "The bf16 model's linear-layer path: native (AVX512-BF16; an error on a CPU "
        "without it), widen (to fp32), or auto (measure both once per process). Empty "
        "counts as auto.",
    .readBy = kReadByDsrt,
    .choices = "auto|native|widen"};

inline constexpr const Knob* kRuntimeKnobList[] = {&kBf16Linear};
inline constexpr KnobTable kRuntimeKnobs{"runtime", kRuntimeKnobList};

}  // namespace ds::knobs

#pragma GCC diagnostic pop
