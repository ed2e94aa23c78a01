// makeCudaOps in a build without CUDA kernels (no nvcc or no toolkit): a clear refusal, so a
// plan asking for `train.device: cuda` fails naming the build, not a missing symbol.
#include "runtime/tensor/ops.h"

namespace ds::runtime {

std::unique_ptr<Ops> makeCudaOps(int device, bool /*allowTf32*/) {
  throw NotSupported("cuda device " + std::to_string(device) +
                     " requested, but this dsrt was built without CUDA kernels (configure with "
                     "the CUDA toolkit and nvcc installed; see docs/gpu.md)");
}

}  // namespace ds::runtime
