// cuBLASLt plumbing private to runtime/tensor/cuda: one column-major product D = alpha op(A) op(B)
// + beta D (C aliases D) with an optional bias epilogue, and the per-shape cache of descriptors
// and heuristic algorithms. Not the row-major linear layer (matmul_lt.cc maps that onto it).
// Invariant: a cached plan is only reused for the same shape, types and pointer alignments.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <compare>
#include <cstdint>
#include <map>

namespace ds::runtime::cuda {

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
};

struct LtPlanKey {
  bool transA, transB;
  int m, n, k, lda, ldb, ldd;
  int abType, dType, compute;
  bool bias;
  uint32_t alignA, alignB, alignD, alignBias;
  auto operator<=>(const LtPlanKey&) const = default;
};

struct LtPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

struct LtPlanCache {
  std::map<LtPlanKey, LtPlan> plans;
  ~LtPlanCache();  // destroys every descriptor; never throws
};

// Enqueues the product on `stream`; throws (cuda_check.h) on any cuBLASLt failure, NotSupported
// when the heuristic offers no algorithm for the shape.
void ltMatmul(cublasLtHandle_t lt, LtPlanCache& cache, void* workspace, size_t workspaceBytes,
              cudaStream_t stream, const LtGemm& g);

}  // namespace ds::runtime::cuda
