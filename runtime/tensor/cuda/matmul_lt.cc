// The linear layer on cuBLASLt (CudaOps::matmulForward / matmulBackward) and the cached product
// of matmul_lt.h. A row-major [R, C] matrix is a column-major [C, R] one, so row-major
// out[N, OC] = inp . W^T is column-major out^T [OC, N] = op(W) . inp^T with op = transpose.
// Not the bias-gradient kernel (kernels.h). Invariant: backward accumulates (beta = 1) but for
// matmulBackwardWrite's dinp (beta = 0); fp32 products use TF32 only when the options allow it.
#include <fmt/format.h>

#include <cstdint>

#include "runtime/tensor/cuda/cuda_check.h"
#include "runtime/tensor/cuda/cuda_ops.h"
#include "runtime/tensor/cuda/kernels.h"
#include "runtime/tensor/cuda/matmul_lt.h"

namespace ds::runtime::cuda {
namespace {

// The largest power of two (at most 256) dividing the address: what the heuristic may assume.
uint32_t alignmentOf(const void* p) {
  auto u = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 256;
  while (a > 1 && (u % a) != 0) a /= 2;
  return a;
}

template <class T>
void setDesc(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const T& value) {
  DS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof(value)));
}

cublasLtEpilogue_t epilogueOf(const LtGemm& g) {
  switch (g.epilogue) {
    case LtEpilogue::kGeluAux:
      return g.bias != nullptr ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
    case LtEpilogue::kDgelu: return CUBLASLT_EPILOGUE_DGELU;  // bias: not with DGELU (checked)
    case LtEpilogue::kNone: break;
  }
  return g.bias != nullptr ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
}

void destroyPlan(LtPlan& p) noexcept {
  if (p.desc) cublasLtMatmulDescDestroy(p.desc);
  if (p.a) cublasLtMatrixLayoutDestroy(p.a);
  if (p.b) cublasLtMatrixLayoutDestroy(p.b);
  if (p.d) cublasLtMatrixLayoutDestroy(p.d);
  p = LtPlan{};
}

LtPlan makePlan(cublasLtHandle_t lt, size_t workspaceBytes, const LtGemm& g, const LtPlanKey& key) {
  LtPlan p;
  try {
    DS_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, g.compute, CUDA_R_32F));
    const cublasOperation_t opA = g.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t opB = g.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
    setDesc(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, opA);
    setDesc(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, opB);
    setDesc(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, epilogueOf(g));
    if (g.bias != nullptr) {
      const int32_t biasType = g.abType;
      setDesc(p.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, biasType);
      setDesc(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, g.bias);  // the heuristic reads alignment
    }
    if (g.epilogue != LtEpilogue::kNone) {
      setDesc(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, static_cast<int64_t>(g.auxLd));
      setDesc(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, static_cast<const void*>(g.aux));
    }
    // Stored shapes (column-major): A is [m, k] or, transposed, [k, m]; likewise B.
    DS_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, g.abType, g.transA ? g.k : g.m,
                                               g.transA ? g.m : g.k, g.lda));
    DS_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, g.abType, g.transB ? g.n : g.k,
                                               g.transB ? g.k : g.n, g.ldb));
    DS_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.d, g.dType, g.m, g.n, g.ldd));

    cublasLtMatmulPreference_t pref = nullptr;
    DS_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    cublasStatus_t rc = CUBLAS_STATUS_SUCCESS;
    auto setPref = [&](cublasLtMatmulPreferenceAttributes_t attr, auto value) {
      if (rc == CUBLAS_STATUS_SUCCESS)
        rc = cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof(value));
    };
    setPref(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, static_cast<uint64_t>(workspaceBytes));
    setPref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.alignA);
    setPref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.alignB);
    setPref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.alignD);
    setPref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.alignD);
    if (rc == CUBLAS_STATUS_SUCCESS) {
      rc = cublasLtMatmulAlgoGetHeuristic(lt, p.desc, p.a, p.b, p.d, p.d, pref, 1, &result, &found);
    }
    cublasLtMatmulPreferenceDestroy(pref);
    DS_CUBLAS_CHECK(rc);
    if (found == 0) {
      destroyPlan(p);  // cached as refused
      return p;
    }
    p.algo = result.algo;
    p.usable = true;
  } catch (...) {
    destroyPlan(p);
    throw;
  }
  return p;
}

}  // namespace

LtPlanCache::~LtPlanCache() {
  for (auto& [key, plan] : plans) destroyPlan(plan);
}

bool ltTryMatmul(cublasLtHandle_t lt, LtPlanCache& cache, void* workspace, size_t workspaceBytes,
                 cudaStream_t stream, const LtGemm& g) {
  DS_CHECK(!(g.epilogue == LtEpilogue::kDgelu && g.bias != nullptr), "DGELU takes no bias");
  const LtPlanKey key{g.transA,
                      g.transB,
                      g.m,
                      g.n,
                      g.k,
                      g.lda,
                      g.ldb,
                      g.ldd,
                      int(g.abType),
                      int(g.dType),
                      int(g.compute),
                      g.bias != nullptr,
                      int(g.epilogue),
                      g.auxLd,
                      alignmentOf(g.a),
                      alignmentOf(g.b),
                      alignmentOf(g.d),
                      g.bias ? alignmentOf(g.bias) : 0u,
                      g.aux ? alignmentOf(g.aux) : 0u};
  auto it = cache.plans.find(key);
  if (it == cache.plans.end()) {
    it = cache.plans.emplace(key, makePlan(lt, workspaceBytes, g, key)).first;
  }
  LtPlan& p = it->second;
  if (!p.usable) return false;
  if (g.bias != nullptr) setDesc(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, g.bias);
  if (g.epilogue != LtEpilogue::kNone)
    setDesc(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, static_cast<const void*>(g.aux));
  const float alpha = 1.f, beta = g.beta;
  const cublasStatus_t rc = cublasLtMatmul(lt, p.desc, &alpha, g.a, p.a, g.b, p.b, &beta, g.d, p.d,
                                           g.d, p.d, &p.algo, workspace, workspaceBytes, stream);
  if (rc == CUBLAS_STATUS_NOT_SUPPORTED && g.epilogue != LtEpilogue::kNone) {
    destroyPlan(p);  // an epilogue the heuristic offered but the kernel refuses: refused from now
    return false;
  }
  DS_CUBLAS_CHECK(rc);
  return true;
}

void ltMatmul(cublasLtHandle_t lt, LtPlanCache& cache, void* workspace, size_t workspaceBytes,
              cudaStream_t stream, const LtGemm& g) {
  if (ltTryMatmul(lt, cache, workspace, workspaceBytes, stream, g)) return;
  throw NotSupported(fmt::format(
      "cuBLASLt offers no algorithm for the product m={} n={} k={} (transA={} transB={}, "
      "A/B type {}, D type {}, bias {}, epilogue {})",
      g.m, g.n, g.k, g.transA, g.transB, int(g.abType), int(g.dType), g.bias != nullptr,
      int(g.epilogue)));
}

namespace {

cudaDataType_t cudaTypeOf(DType dt, const char* op) {
  switch (dt) {
    case DType::kF32: return CUDA_R_32F;
    case DType::kBF16: return CUDA_R_16BF;
    case DType::kF16: return CUDA_R_16F;
    default:
      throw NotSupported(
          fmt::format("cuda {}: element type {} (only fp32, bf16 and fp16)", op, dtypeName(dt)));
  }
}

cublasComputeType_t computeFor(DType dt, bool allowTf32) {
  return (dt == DType::kF32 && allowTf32) ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

}  // namespace

LtGemm linearForwardGemm(void* out, const void* inp, const void* weight, int N, int C, int OC,
                         DType dt, bool allowTf32) {
  LtGemm g;
  g.abType = g.dType = cudaTypeOf(dt, "matmulForward");
  g.compute = computeFor(dt, allowTf32);
  g.transA = true;  // W [OC, C] row-major is [C, OC] column-major
  g.m = OC, g.n = N, g.k = C;
  g.a = weight, g.lda = C;
  g.b = inp, g.ldb = C;
  g.d = out, g.ldd = OC;
  g.beta = 0.f;
  return g;
}

LtGemm linearDinpGemm(void* dinp, const void* dout, const void* weight, int N, int C, int OC,
                      DType dt, bool allowTf32, float beta) {
  // dinp^T [C, N] (+)= W^T [C, OC] . dout^T [OC, N]: A = W ([C, OC] column-major), B = dout.
  LtGemm g;
  g.abType = g.dType = cudaTypeOf(dt, "matmulBackward");
  g.compute = computeFor(dt, allowTf32);
  g.m = C, g.n = N, g.k = OC;
  g.a = weight, g.lda = C;
  g.b = dout, g.ldb = OC;
  g.d = dinp, g.ldd = C;
  g.beta = beta;
  return g;
}

void CudaOps::matmulForward(void* out, const void* inp, const void* weight, const void* bias, int N,
                            int C, int OC, DType dt) {
  LtGemm g = linearForwardGemm(out, inp, weight, N, C, OC, dt, options_.allowTf32);
  // The fused bias epilogue wants an aligned vector; any other bias is a kernel after the product.
  const bool fuseBias = bias != nullptr && reinterpret_cast<uintptr_t>(bias) % 16 == 0;
  g.bias = fuseBias ? bias : nullptr;
  ltMatmul(lt_, *ltPlans_, ltWorkspace_, options_.cublasWorkspaceBytes, stream_, g);
  if (bias != nullptr && !fuseBias) launchAddBias(out, bias, N, OC, dt, stream_);
}

void CudaOps::matmulBackward(void* dinp, float* dweight, float* dbias, const void* dout,
                             const void* inp, const void* weight, int N, int C, int OC, DType dt) {
  linearBackward(dinp, 1.f, dweight, dbias, dout, inp, weight, N, C, OC, dt);
}

void CudaOps::matmulBackwardWrite(void* dinp, float* dweight, float* dbias, const void* dout,
                                  const void* inp, const void* weight, int N, int C, int OC,
                                  DType dt) {
  DS_CHECK(dinp != nullptr, "matmulBackwardWrite needs dinp");
  linearBackward(dinp, 0.f, dweight, dbias, dout, inp, weight, N, C, OC, dt);
}

void CudaOps::linearBackward(void* dinp, float dinpBeta, float* dweight, float* dbias,
                             const void* dout, const void* inp, const void* weight, int N, int C,
                             int OC, DType dt) {
  const cudaDataType_t type = cudaTypeOf(dt, "matmulBackward");
  const cublasComputeType_t compute = computeFor(dt, options_.allowTf32);
  if (dinp != nullptr) {
    const LtGemm g = linearDinpGemm(dinp, dout, weight, N, C, OC, dt, options_.allowTf32, dinpBeta);
    ltMatmul(lt_, *ltPlans_, ltWorkspace_, options_.cublasWorkspaceBytes, stream_, g);
  }
  if (dweight != nullptr) {
    // dW^T [C, OC] += inp^T [C, N] . dout [N, OC]: A = inp, B = dout ([OC, N], transposed).
    LtGemm g;
    g.abType = type;
    g.dType = CUDA_R_32F;
    g.compute = compute;
    g.transB = true;
    g.m = C, g.n = OC, g.k = N;
    g.a = inp, g.lda = C;
    g.b = dout, g.ldb = OC;
    g.d = dweight, g.ldd = C;
    g.beta = 1.f;
    ltMatmul(lt_, *ltPlans_, ltWorkspace_, options_.cublasWorkspaceBytes, stream_, g);
  }
  if (dbias != nullptr) {
    launchColumnSumAdd(dbias, dout, N, OC, dt, scratch(columnSumScratchBytes(N, OC)), stream_);
  }
}

}  // namespace ds::runtime::cuda
