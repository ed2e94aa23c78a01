// CudaOps::matmulGeluForward / matmulGeluBackward: the MLP's GELU fused into cuBLASLt epilogues
// (llm.c's sm_90 path): forward GELU_AUX[_BIAS] writes gelu(product + bias) and the
// pre-activation as aux; backward's dinp product uses DGELU (gelu'(aux) times the product).
// Not the bias gradient (launchColumnSumAdd, as in matmulBackward). Invariant: where fusion is
// off (CudaOpsOptions::fuseGelu, DS_CUDA_GELU_FUSION=off) or cuBLASLt offers no algorithm for the
// epilogue, the same results come from the separate product and GELU kernels, never an error.
#include <cstdint>

#include "core/log.h"
#include "runtime/tensor/cuda/cuda_ops.h"
#include "runtime/tensor/cuda/kernels.h"
#include "runtime/tensor/cuda/matmul_lt.h"

namespace ds::runtime::cuda {
namespace {

// cuBLASLt wants the aux leading dimension a multiple of 8 (cublasLt.h, EPILOGUE_AUX_LD).
bool auxShapeOk(int ld, const void* aux) { return ld % 8 == 0 && aligned16(aux); }

void noteFallback(bool& logged, const char* what, int m, int n, int k) {
  if (logged) return;
  logged = true;
  DS_LOG_INFO("tensor",
              "cuBLASLt offers no {} epilogue for m={} n={} k={}; running the separate kernels",
              what, m, n, k);
}

}  // namespace

void CudaOps::matmulGeluForward(void* out, void* pre, const void* inp, const void* weight,
                                const void* bias, int N, int C, int OC, DType dt) {
  if (options_.fuseGelu && auxShapeOk(OC, pre) && (bias == nullptr || aligned16(bias))) {
    LtGemm g = linearForwardGemm(out, inp, weight, N, C, OC, dt, options_.allowTf32);
    g.bias = bias;
    g.epilogue = LtEpilogue::kGeluAux;
    g.aux = pre;
    g.auxLd = OC;
    if (ltTryMatmul(lt_, *ltPlans_, ltWorkspace_, options_.cublasWorkspaceBytes, stream_, g))
      return;
    noteFallback(geluFallbackLogged_, "GELU_AUX", OC, N, C);
  }
  matmulForward(pre, inp, weight, bias, N, C, OC, dt);
  geluForward(out, pre, static_cast<size_t>(N) * OC, dt);
}

void CudaOps::matmulGeluBackward(void* dpre, float* dweight, float* dbias, const void* dout,
                                 const void* act, const void* pre, const void* weight, int N, int C,
                                 int OC, DType dt) {
  // dpre is written (beta = 0): the DGELU epilogue multiplies the whole product, C included.
  LtGemm g = linearDinpGemm(dpre, dout, weight, N, C, OC, dt, options_.allowTf32, 0.f);
  bool fused = false;
  if (options_.fuseGelu && auxShapeOk(C, pre)) {
    LtGemm f = g;
    f.epilogue = LtEpilogue::kDgelu;
    f.aux = const_cast<void*>(pre);  // read only by DGELU
    f.auxLd = C;
    fused = ltTryMatmul(lt_, *ltPlans_, ltWorkspace_, options_.cublasWorkspaceBytes, stream_, f);
    if (!fused) noteFallback(geluFallbackLogged_, "DGELU", C, N, OC);
  }
  if (!fused) {
    ltMatmul(lt_, *ltPlans_, ltWorkspace_, options_.cublasWorkspaceBytes, stream_, g);
    launchGeluGradScale(dpre, pre, static_cast<size_t>(N) * C, dt, stream_);
  }
  matmulBackward(nullptr, dweight, dbias, dout, act, weight, N, C, OC, dt);
}

}  // namespace ds::runtime::cuda
