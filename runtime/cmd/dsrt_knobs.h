// The knob tables of the libraries dsrt links (core, comm, zero, runtime): what
// `dsrt --help-env` lists and docs/knobs.md documents. A component dsrt gains adds its table here.
#pragma once

#include "comm/comm_knobs.h"
#include "core/core_knobs.h"
#include "runtime/tensor/tensor_knobs.h"
#include "zero/zero_knobs.h"

namespace ds::runtime {

inline constexpr KnobTable kDsrtKnobTables[] = {knobs::kCoreKnobs, knobs::kCommKnobs,
                                                knobs::kZeroKnobs, knobs::kRuntimeKnobs};

}  // namespace ds::runtime
