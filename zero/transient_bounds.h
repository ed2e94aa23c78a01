// Upper bounds of the stage 2/3 transient buffers, predicted from the block structure so that the
// memory table printed before the first step already shows them (the measured peaks are 0 until
// backward has run): the per-parameter gradient buffers held during backward, and stage 3's
// gathered parameters. Not the buffers themselves (TransientGrads, ParamGatherer). Invariant: a
// bound is >= what the stage can hold under the hook order of zero_engine.h.
#pragma once

#include <cstddef>
#include <functional>

namespace ds::zero {

class ParamIndex;

// Elements of one parameter's transient buffer (stage 2: numel; stage 3: chunk * world).
using ParamElems = std::function<size_t(size_t param)>;

// Backward runs blocks from the last to 0; a parameter's gradient buffer is taken when the first
// block using it starts backward and handed back at most one bucket after the block that
// completes it: max over blocks of the held elements, plus one bucket.
size_t transientGradBound(const ParamIndex& index, const ParamElems& elems, size_t bucket);

// Stage 3: a block's own non-persistent parameters plus what the prefetch may add for the next
// one (at most prefetchElems, in either direction): max over blocks.
size_t gatherBound(const ParamIndex& index, const ParamElems& elems,
                   const std::function<bool(size_t)>& persistent, size_t prefetchElems);

}  // namespace ds::zero
