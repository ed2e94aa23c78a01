// cuBLASLt plumbing private to runtime/tensor/cuda: one column-major product D = alpha op(A) op(B)
// + beta D (C aliases D) with an optional bias and GELU epilogue, and the per-shape cache of
// descriptors and heuristic algorithms (a shape the heuristic refuses is cached as refused). Not
// the row-major linear layer (matmul_lt.cc maps that onto it). Invariant: a cached plan is only
// reused for the same shape, types and pointer alignments.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <compare>
#include <cstdint>
#include <map>

#include "core/dtype.h"

namespace ds::runtime::cuda {

// What the epilogue does besides the optional bias: nothing; D = gelu(product + bias) with the
// pre-activation stored to aux (GELU_AUX[_BIAS]); or D = gelu'(aux) * product (DGELU).
enum class LtEpilogue { kNone, kGeluAux, kDgelu };

// One product in cuBLASLt's column-major terms: op(A) is [m, k], op(B) is [k, n], D is [m, n].
struct LtGemm {
  bool transA = false, transB = false;
  int m = 0, n = 0, k = 0;
  const void* a = nullptr;
  int lda = 0;
  const void* b = nullptr;
  int ldb = 0;
  void* d = nullptr;  // also C (read when beta != 0)
  int ldd = 0;
  cudaDataType_t abType = CUDA_R_32F, dType = CUDA_R_32F;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  float beta = 0.f;
  const void* bias = nullptr;  // [m] of abType, added to every column (BIAS epilogue)
  LtEpilogue epilogue = LtEpilogue::kNone;
  void* aux = nullptr;  // [m, n] of dType, leading dimension auxLd (a multiple of 8), GELU only
  int auxLd = 0;
};

struct LtPlanKey {
  bool transA, transB;
  int m, n, k, lda, ldb, ldd;
  int abType, dType, compute;
  bool bias;
  int epilogue, auxLd;
  uint32_t alignA, alignB, alignD, alignBias, alignAux;
  auto operator<=>(const LtPlanKey&) const = default;
};

struct LtPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool usable = false;  // false: the heuristic offered no algorithm (descriptors destroyed)
};

struct LtPlanCache {
  std::map<LtPlanKey, LtPlan> plans;
  ~LtPlanCache();  // destroys every descriptor; never throws
};

// Enqueues the product on `stream` and returns true, or returns false (enqueuing nothing) when
// the heuristic offers no algorithm for it, or cublasLtMatmul answers NOT_SUPPORTED for a GELU
// epilogue (cached as refused either way); throws (cuda_check.h) on any other cuBLASLt failure.
bool ltTryMatmul(cublasLtHandle_t lt, LtPlanCache& cache, void* workspace, size_t workspaceBytes,
                 cudaStream_t stream, const LtGemm& g);
// ltTryMatmul, with NotSupported naming the product where no algorithm is offered.
void ltMatmul(cublasLtHandle_t lt, LtPlanCache& cache, void* workspace, size_t workspaceBytes,
              cudaStream_t stream, const LtGemm& g);

// The row-major linear layer in LtGemm terms (matmul_lt.cc): out[N, OC] = inp . W^T (no bias
// set), and dinp[N, C] = beta * dinp + dout . W. NotSupported for a dt other than fp32 or bf16.
LtGemm linearForwardGemm(void* out, const void* inp, const void* weight, int N, int C, int OC,
                         DType dt, bool allowTf32);
LtGemm linearDinpGemm(void* dinp, const void* dout, const void* weight, int N, int C, int OC,
                      DType dt, bool allowTf32, float beta);

}  // namespace ds::runtime::cuda
