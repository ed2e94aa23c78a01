// CudaOps: the op interface (runtime/tensor/ops.h) on one CUDA device. Every kernel is enqueued on
// the legacy default stream (stream 0), so the NCCL backend, which orders its own stream after
// the default stream's work, sees the inputs finished. The asynchronous copies (ops.h) run on a
// second, non-blocking stream (copyStream()) with page-locked host memory; CUDA events order the
// two (cuda_copy.cc). Matrix products go through cuBLASLt with
// fp32 accumulation (TF32 for fp32 only when allowTf32). Not thread-safe: one training thread.
// The method bodies are spread over one file per op family (cuda_ops.cc: memory, cuBLASLt,
// reductions; *_kernels.cu: the kernels and their thin launchers).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <memory>
#include <string>

#include "runtime/tensor/ops.h"

namespace ds::runtime::cuda {

struct LtPlanCache;  // cuBLASLt descriptors and algorithms per matmul shape (matmul_lt.h)

struct CudaOpsOptions {
  bool allowTf32 = false;                   // fp32 products may use TF32 tensor cores
  size_t cublasWorkspaceBytes = 32u << 20;  // cuBLASLt workspace (32 MiB, the Hopper choice)
  // matmulGelu* fuse GELU into cuBLASLt epilogues where offered (else the separate kernels);
  // makeCudaOps sets it from DS_CUDA_GELU_FUSION.
  bool fuseGelu = true;
};

class CudaOps final : public Ops {
 public:
  CudaOps(int device, CudaOpsOptions options);
  ~CudaOps() override;
  CudaOps(const CudaOps&) = delete;
  CudaOps& operator=(const CudaOps&) = delete;

  std::string name() const override { return name_; }
  bool onDevice() const override { return true; }
  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }

  void* alloc(size_t bytes, const std::string& what) override;
  void release(void* ptr) noexcept override;
  void upload(void* dst, const void* hostSrc, size_t bytes) override;
  void download(void* hostDst, const void* src, size_t bytes) override;
  void copy(void* dst, const void* src, size_t bytes) override;
  void zero(void* dst, size_t bytes) override;
  void synchronize() override;

  void* allocPinned(size_t bytes, const std::string& what) override;
  void releasePinned(void* ptr) noexcept override;
  void uploadAsync(void* dst, const void* pinnedSrc, size_t bytes) override;
  void downloadAsync(void* pinnedDst, const void* src, size_t bytes) override;
  std::unique_ptr<OpsEvent> newEvent() override;
  void record(OpsEvent& event, OpsStream stream) override;
  void streamWait(OpsStream stream, const OpsEvent& event) override;
  bool streamWaitForeign(OpsStream stream, const void* cudaEvent) override;
  bool registerHost(void* ptr, size_t bytes) override;
  void unregisterHost(void* ptr) noexcept override;
  bool done(const OpsEvent& event) override;
  void hostWait(const OpsEvent& event, std::chrono::milliseconds timeout,
                const std::string& what) override;
  cudaStream_t copyStream() const { return copyStream_; }

  void encoderForward(void* out, const int32_t* tokens, const void* wte, const void* wpe, int B,
                      int T, int C, DType dt) override;
  void encoderBackward(float* dwte, float* dwpe, const void* dout, const int32_t* tokens, int B,
                       int T, int C, DType dt) override;
  void layernormForward(void* out, float* mean, float* rstd, const void* inp, const void* weight,
                        const void* bias, int N, int C, DType dt) override;
  void layernormBackward(void* dinp, float* dweight, float* dbias, const void* dout,
                         const void* inp, const void* weight, const float* mean, const float* rstd,
                         int N, int C, DType dt) override;
  void residualLayernormForward(void* res, void* out, float* mean, float* rstd, const void* a,
                                const void* b, const void* weight, const void* bias, int N, int C,
                                DType dt) override;
  void matmulForward(void* out, const void* inp, const void* weight, const void* bias, int N, int C,
                     int OC, DType dt) override;
  void matmulBackward(void* dinp, float* dweight, float* dbias, const void* dout, const void* inp,
                      const void* weight, int N, int C, int OC, DType dt) override;
  void matmulBackwardWrite(void* dinp, float* dweight, float* dbias, const void* dout,
                           const void* inp, const void* weight, int N, int C, int OC,
                           DType dt) override;
  void matmulGeluForward(void* out, void* pre, const void* inp, const void* weight,
                         const void* bias, int N, int C, int OC, DType dt) override;
  void matmulGeluBackward(void* dpre, float* dweight, float* dbias, const void* dout,
                          const void* act, const void* pre, const void* weight, int N, int C,
                          int OC, DType dt) override;
  size_t attentionAuxBytes(int B, int T, int NH) const override;
  void attentionForward(void* out, void* aux, const void* qkv, int B, int T, int C, int NH,
                        DType dt) override;
  void attentionBackward(void* dqkv, const void* dout, const void* qkv, const void* out,
                         const void* aux, int B, int T, int C, int NH, DType dt) override;
  void geluForward(void* out, const void* inp, size_t n, DType dt) override;
  void geluBackward(void* dinp, const void* inp, const void* dout, size_t n, DType dt) override;
  void residualForward(void* out, const void* a, const void* b, size_t n, DType dt) override;
  void residualBackward(void* da, void* db, const void* dout, size_t n, DType dt) override;
  void crossEntropyForward(const void* logits, float* losses, float* lse, const int32_t* targets,
                           int N, int V, int ld, DType dt) override;
  void crossEntropyBackward(void* logitsToDlogits, const float* lse, const int32_t* targets, int N,
                            int V, int ld, float scale, DType dt) override;

  double sum(const float* x, size_t n) override;
  double sumSquares(const float* x, size_t n) override;
  void scale(float* x, size_t n, float factor) override;
  void toBf16(bf16* dst16, const float* src, size_t n) override;
  void toFp16(fp16* dst16, const float* src, size_t n) override;
  void roundToFp16(float* x, size_t n) override;
  void adam(float* params, float* expAvg, float* expAvgSq, const float* grads, bf16* out16,
            const DecayRange* ranges, int count, const AdamStep& step) override;
  void sgd(float* params, float* momentum, const float* grads, bf16* out16,
           const DecayRange* ranges, int count, const SgdStep& step) override;

 private:
  // A scratch buffer of at least `bytes` (grown, never shrunk; one user at a time).
  void* scratch(size_t bytes);
  // matmulBackward with dinp's product scaled by dinpBeta (1 accumulates, 0 writes).
  void linearBackward(void* dinp, float dinpBeta, float* dweight, float* dbias, const void* dout,
                      const void* inp, const void* weight, int N, int C, int OC, DType dt);
  // Frees everything the constructor made; used by the destructor and a failed constructor.
  void freeAll() noexcept;

  int device_;
  CudaOpsOptions options_;
  std::string name_;
  cudaStream_t stream_ = nullptr;      // the legacy default stream (see above)
  cudaStream_t copyStream_ = nullptr;  // non-blocking: ordered with stream_ only by events
  cublasLtHandle_t lt_ = nullptr;
  void* ltWorkspace_ = nullptr;
  void* scratch_ = nullptr;
  size_t scratchBytes_ = 0;
  std::unique_ptr<LtPlanCache> ltPlans_;
  bool geluFallbackLogged_ = false;  // one log line when an epilogue is refused
};

}  // namespace ds::runtime::cuda
