// CpuOps: the host implementation of the op interface (runtime/tensor/ops.h), a thin wrapper over
// the fp32 kernels of runtime/tensor and zero/cpu_adam. Not a bf16 path: every op given kBF16
// throws NotSupported (bf16 on the CPU goes through Gpt2Model). Invariant: each op computes
// exactly what the host kernel it wraps computes (tests/runtime/tensor/ops compare bit for bit).
// The asynchronous copies are Ops' synchronous defaults (memcpy; every event complete).
#pragma once

#include <string>
#include <vector>

#include "runtime/tensor/ops.h"

namespace ds::runtime {

class CpuOps : public Ops {  // not final: tests derive fakes of the copy stream
 public:
  std::string name() const override { return "cpu"; }
  bool onDevice() const override { return false; }

  void* alloc(size_t bytes, const std::string& what) override;
  void release(void* ptr) noexcept override;
  void upload(void* dst, const void* hostSrc, size_t bytes) override;
  void download(void* hostDst, const void* src, size_t bytes) override;
  void copy(void* dst, const void* src, size_t bytes) override;
  void zero(void* dst, size_t bytes) override;
  void synchronize() override {}

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
  std::vector<float> scratchTT_;    // attention backward's T x T scratch, grown on demand
  std::vector<float> scratchGelu_;  // matmulGeluBackward's d(act), grown on demand
};

}  // namespace ds::runtime
