// Builds without a CUDA compiler: the staging entry points exist but refuse, so fp16/bf16
// sum/avg fail with NotSupported instead of silently reducing in 16 bit (the backend checks
// first; these only keep the link whole).
#include "comm/nccl/half_staging.h"

#if !DS_NCCL_HALF_STAGING
#include "core/error.h"

namespace ds::comm::nccl_impl {
namespace {
[[noreturn]] void refuse() {
  throw NotSupported("nccl: fp32 staging kernels are not built (no CUDA compiler was found)");
}
}  // namespace

void launchWiden(const void*, float*, size_t, bool, cudaStream_t) { refuse(); }
void launchNarrow(const float*, void*, size_t, bool, float, cudaStream_t) { refuse(); }
StagingBuffer::~StagingBuffer() = default;
float* StagingBuffer::get(size_t) { refuse(); }

}  // namespace ds::comm::nccl_impl
#endif
