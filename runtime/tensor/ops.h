// Ops: the one interface the device-agnostic model (runtime/model/ops_gpt2) and the device
// engine call for memory and compute. CpuOps (runtime/tensor/cpu/) runs the host kernels of
// runtime/tensor; CudaOps (runtime/tensor/cuda/) runs CUDA kernels and cuBLASLt on one device and
// one compute stream. Not an owner of model state: callers own every buffer they alloc().
// Conventions, the same in every implementation (tests/runtime/tensor/cuda compare them):
// - Pointers are in the Ops' memory (host for CpuOps, device for CudaOps); only upload/download
//   cross between host and that memory. Calls are ordered on one stream; synchronize() waits.
// - `dt` is the element type of activations and of the weights a call reads: kF32 or kBF16
//   (16-bit storage, fp32 arithmetic and accumulation). Parameter gradients, LayerNorm
//   mean/rstd, losses and optimizer states are always fp32.
// - Backward calls ACCUMULATE (+=) into every gradient they are given (any may be null where the
//   signature says so), as the CPU kernels of runtime/tensor do.
// - Layouts are llm.c's: rows of C channels; linear weights [OC, C]; qkv [B, T, 3C].
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/dtype.h"
#include "core/error.h"

namespace ds::runtime {

// alloc() could not get the bytes; the message names what was asked for, how much, and what the
// device has (a caller may append its memory table).
class OutOfMemoryError : public Error {
 public:
  using Error::Error;
};

// The two streams of an Ops: kCompute runs every call of the interface in order; kCopy runs
// only uploadAsync/downloadAsync, concurrently with compute on a device. Events order them.
enum class OpsStream { kCompute, kCopy };

// A point in one stream's order (Ops::newEvent; owned by the caller, released with it). A fresh
// event, never recorded, is complete.
class OpsEvent {
 public:
  virtual ~OpsEvent() = default;
};

// One run of a flat optimizer buffer and whether weight decay applies to it.
struct DecayRange {
  size_t offset = 0, size = 0;
  bool decay = true;
};

// Adam / AdamW on device (the CPU engine's zero/cpu_adam formulas). grad is multiplied by
// gradScale first (unscale and clip folded into one factor).
struct AdamStep {
  float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weightDecay = 0.f;
  bool adamw = true;           // decoupled decay (AdamW) or L2 added to the gradient (Adam)
  bool biasCorrection = true;  // divide by 1 - beta^step
  int64_t step = 1;            // 1-based count of this update
  float gradScale = 1.f;
};

struct SgdStep {
  float lr = 1e-3f, momentum = 0.f, weightDecay = 0.f;
  float gradScale = 1.f;
};

class Ops {
 public:
  virtual ~Ops() = default;

  // "cpu", or "cuda:0 (NVIDIA H200, 139.8 GiB)".
  virtual std::string name() const = 0;
  // Memory is device memory, not addressable by the host.
  virtual bool onDevice() const = 0;

  // --- memory -----------------------------------------------------------------------------
  // Throws OutOfMemoryError naming `what`, the bytes asked for and the bytes free.
  virtual void* alloc(size_t bytes, const std::string& what) = 0;
  virtual void release(void* ptr) noexcept = 0;
  virtual void upload(void* dst, const void* hostSrc, size_t bytes) = 0;
  virtual void download(void* hostDst, const void* src, size_t bytes) = 0;  // waits
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;
  virtual void zero(void* dst, size_t bytes) = 0;
  virtual void synchronize() = 0;

  // --- asynchronous copies (ZeRO-Offload's pipeline) ----------------------------------------
  // The defaults (runtime/tensor/ops_async.cc) are synchronous and correct for every Ops: pinned
  // memory is plain host memory, the async copies are upload()/download() and every event is
  // complete. CpuOps keeps them; CudaOps overrides them with page-locked memory, a second stream
  // and CUDA events. Host memory given to the async copies must come from allocPinned (pageable
  // memory would make a device copy synchronous) and must not be touched until an event
  // recorded on kCopy after the copy has completed (memory page-locked by registerHost may be
  // given too).
  // Throws OutOfMemoryError naming `what` and the bytes.
  virtual void* allocPinned(size_t bytes, const std::string& what);
  virtual void releasePinned(void* ptr) noexcept;
  // Page-locks host memory someone else allocated so the async copies may read it directly, as
  // allocPinned's; false where this Ops cannot or the system refuses (stage it instead). The
  // memory must stay allocated until unregisterHost(ptr).
  virtual bool registerHost(void* ptr, size_t bytes);
  virtual void unregisterHost(void* ptr) noexcept;
  // On kCopy: returns at once on a device; the bytes have landed when a later event recorded on
  // kCopy completes.
  virtual void uploadAsync(void* dst, const void* pinnedSrc, size_t bytes);
  virtual void downloadAsync(void* pinnedDst, const void* src, size_t bytes);
  virtual std::unique_ptr<OpsEvent> newEvent();
  virtual void record(OpsEvent& event, OpsStream stream);  // after what `stream` has queued
  // `stream`'s later work starts after `event` (no host wait).
  virtual void streamWait(OpsStream stream, const OpsEvent& event);
  // The same for a CUDA event of another library (comm::Work::deviceEvent()); false where this
  // Ops cannot (no device streams): the caller then waits on the host.
  virtual bool streamWaitForeign(OpsStream stream, const void* cudaEvent);
  virtual bool done(const OpsEvent& event);  // completed (never blocks)
  // Blocks the calling thread until `event` completes; throws TimeoutError naming `what`, this
  // Ops and `timeout` when it does not.
  virtual void hostWait(const OpsEvent& event, std::chrono::milliseconds timeout,
                        const std::string& what);

  // --- layers (forward WRITES its outputs; backward ACCUMULATES) -----------------------------
  // out[b,t,:] = wte[tokens[b,t]] + wpe[t]; tokens in Ops memory, already range-checked.
  virtual void encoderForward(void* out, const int32_t* tokens, const void* wte, const void* wpe,
                              int B, int T, int C, DType dt) = 0;
  virtual void encoderBackward(float* dwte, float* dwpe, const void* dout, const int32_t* tokens,
                               int B, int T, int C, DType dt) = 0;
  // LayerNorm, eps 1e-5. mean/rstd [N] fp32 are saved for backward.
  virtual void layernormForward(void* out, float* mean, float* rstd, const void* inp,
                                const void* weight, const void* bias, int N, int C, DType dt) = 0;
  virtual void layernormBackward(void* dinp, float* dweight, float* dbias, const void* dout,
                                 const void* inp, const void* weight, const float* mean,
                                 const float* rstd, int N, int C, DType dt) = 0;
  // res = a + b and out = LayerNorm(res) (both [N, C], WRITTEN; mean/rstd saved): residualForward
  // then layernormForward, in one pass on a device where the width allows.
  virtual void residualLayernormForward(void* res, void* out, float* mean, float* rstd,
                                        const void* a, const void* b, const void* weight,
                                        const void* bias, int N, int C, DType dt) = 0;
  // out[N, OC] = inp[N, C] . weight[OC, C]^T + bias[OC] (bias may be null).
  virtual void matmulForward(void* out, const void* inp, const void* weight, const void* bias,
                             int N, int C, int OC, DType dt) = 0;
  // dinp[N, C] (dt, may be null), dweight[OC, C] and dbias[OC] (fp32, dbias may be null).
  virtual void matmulBackward(void* dinp, float* dweight, float* dbias, const void* dout,
                              const void* inp, const void* weight, int N, int C, int OC,
                              DType dt) = 0;
  // matmulBackward with dinp[N, C] (dt, not null) WRITTEN, not accumulated (the second exception
  // to the accumulate rule): for a caller whose dinp holds nothing yet, which saves zeroing it
  // and the product reading it back. dweight and dbias ACCUMULATE. The default zeroes dinp, then
  // calls matmulBackward; CudaOps runs the product with beta = 0.
  virtual void matmulBackwardWrite(void* dinp, float* dweight, float* dbias, const void* dout,
                                   const void* inp, const void* weight, int N, int C, int OC,
                                   DType dt) {
    zero(dinp, static_cast<size_t>(N) * static_cast<size_t>(C) * dtypeSize(dt));
    matmulBackward(dinp, dweight, dbias, dout, inp, weight, N, C, OC, dt);
  }
  // The MLP's first product and its GELU: pre[N, OC] = inp . weight^T + bias (bias may be null)
  // and out[N, OC] = gelu(pre), both WRITTEN (pre is what matmulGeluBackward needs). The same as
  // matmulForward then geluForward up to where the bias enters the sum (CpuOps adds it after the
  // product, runtime/tensor/elementwise.h biasGeluForward); CUDA fuses the GELU into the product's
  // epilogue where it can.
  virtual void matmulGeluForward(void* out, void* pre, const void* inp, const void* weight,
                                 const void* bias, int N, int C, int OC, DType dt) = 0;
  // matmulBackward of a product whose input act[N, C] = gelu(pre[N, C]), with GELU's backward:
  // dpre[N, C] = gelu'(pre) * (dout . weight) is WRITTEN (the exception to the accumulate rule:
  // a fused epilogue cannot add); dweight[OC, C] and dbias[OC] (fp32, dbias may be null)
  // ACCUMULATE as in matmulBackward.
  virtual void matmulGeluBackward(void* dpre, float* dweight, float* dbias, const void* dout,
                                  const void* act, const void* pre, const void* weight, int N,
                                  int C, int OC, DType dt) = 0;
  // Causal self-attention. aux is what backward needs besides qkv and out; its size is
  // attentionAuxBytes() (CPU: the [B, NH, T, T] probabilities; CUDA: the [B, NH, T] fp32
  // log-sum-exp of a flash-style kernel, no T x T buffer).
  virtual size_t attentionAuxBytes(int B, int T, int NH) const = 0;
  virtual void attentionForward(void* out, void* aux, const void* qkv, int B, int T, int C, int NH,
                                DType dt) = 0;
  virtual void attentionBackward(void* dqkv, const void* dout, const void* qkv, const void* out,
                                 const void* aux, int B, int T, int C, int NH, DType dt) = 0;
  // GPT-2's tanh GELU.
  virtual void geluForward(void* out, const void* inp, size_t n, DType dt) = 0;
  virtual void geluBackward(void* dinp, const void* inp, const void* dout, size_t n, DType dt) = 0;
  // out = a + b; backward: da += dout, db += dout.
  virtual void residualForward(void* out, const void* a, const void* b, size_t n, DType dt) = 0;
  virtual void residualBackward(void* da, void* db, const void* dout, size_t n, DType dt) = 0;
  // Softmax cross-entropy over rows of logits[N, V] with row stride ld >= V (a vocabulary padded
  // to an aligned width, llm.c's Vp: columns [V, ld) are not part of the softmax). Forward only
  // READS the logits (one pass on a device): losses[n] = -log p[target] (0 where target < 0) and
  // lse[n] = log sum_{j<V} exp(logits[n, j]) (fp32, every row), which backward needs.
  // targets in Ops memory.
  virtual void crossEntropyForward(const void* logits, float* losses, float* lse,
                                   const int32_t* targets, int N, int V, int ld, DType dt) = 0;
  // The logits (unchanged since forward) become dlogits = (p - onehot(target)) * scale in place,
  // p = exp(logit - lse[n]) (rows with target < 0: zeros); the padding columns [V, ld) become
  // zeros. WRITES (the logits buffer is its own gradient), one pass on a device.
  virtual void crossEntropyBackward(void* logitsToDlogits, const float* lse, const int32_t* targets,
                                    int N, int V, int ld, float scale, DType dt) = 0;

  // --- reductions and the optimizer (fp32 buffers) -----------------------------------------
  // Sum of x[0..n), in double on the host (waits). NaN/inf propagate.
  virtual double sum(const float* x, size_t n) = 0;
  // Sum of squares of x[0..n) (the squared L2 norm), on the host (waits). NaN/inf propagate.
  virtual double sumSquares(const float* x, size_t n) = 0;
  virtual void scale(float* x, size_t n, float factor) = 0;
  // dst16[i] = bf16(src[i]), round to nearest even.
  virtual void toBf16(bf16* dst16, const float* src, size_t n) = 0;
  // dst16[i] = fp16(src[i]): roundToFp16's rounding, stored as fp16 (the fp16 compute copies).
  virtual void toFp16(fp16* dst16, const float* src, size_t n) = 0;
  // In place: x[i] = float(fp16(x[i])), round to nearest even, +-inf beyond fp16's range (65520
  // and above), NaN stays NaN, fp16 subnormals kept (multiples of 2^-24). fp16 mode's emulation
  // (runtime/engine/fp16_hooks.h) on whichever memory the Ops owns.
  virtual void roundToFp16(float* x, size_t n) = 0;
  // One Adam step over every range of the flat buffers (one launch where the device allows);
  // out16 (may be null) receives bf16 of the updated params in the same pass.
  virtual void adam(float* params, float* expAvg, float* expAvgSq, const float* grads, bf16* out16,
                    const DecayRange* ranges, int count, const AdamStep& step) = 0;
  virtual void sgd(float* params, float* momentum, const float* grads, bf16* out16,
                   const DecayRange* ranges, int count, const SgdStep& step) = 0;
};

// The host implementation (always built).
std::unique_ptr<Ops> makeCpuOps();
// The CUDA implementation on `device` (an index among the visible devices; fp32 products use TF32
// where allowTf32); throws NotSupported
// in a build without CUDA.
std::unique_ptr<Ops> makeCudaOps(int device, bool allowTf32 = false);

// Memory from one of an Ops' allocators, owned by RAII (the Ops must outlive it): OpsBuffer for
// Ops memory (alloc/release), PinnedBuffer for host memory of the async copies
// (allocPinned/releasePinned).
template <void* (Ops::*Alloc)(size_t, const std::string&), void (Ops::*Release)(void*) noexcept>
class OwnedOpsMemory {
 public:
  OwnedOpsMemory() = default;
  OwnedOpsMemory(Ops& ops, size_t bytes, const std::string& what)
      : ops_(&ops), ptr_(bytes ? (ops.*Alloc)(bytes, what) : nullptr), bytes_(bytes) {}
  ~OwnedOpsMemory() { reset(); }
  OwnedOpsMemory(OwnedOpsMemory&& other) noexcept { *this = std::move(other); }
  OwnedOpsMemory& operator=(OwnedOpsMemory&& other) noexcept {
    if (this != &other) {
      reset();
      ops_ = other.ops_;
      ptr_ = other.ptr_;
      bytes_ = other.bytes_;
      other.ptr_ = nullptr;
      other.bytes_ = 0;
    }
    return *this;
  }
  OwnedOpsMemory(const OwnedOpsMemory&) = delete;
  OwnedOpsMemory& operator=(const OwnedOpsMemory&) = delete;

  void reset() noexcept {
    if (ptr_ != nullptr) (ops_->*Release)(ptr_);
    ptr_ = nullptr;
    bytes_ = 0;
  }
  void* get() const { return ptr_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }

 private:
  Ops* ops_ = nullptr;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

using OpsBuffer = OwnedOpsMemory<&Ops::alloc, &Ops::release>;
using PinnedBuffer = OwnedOpsMemory<&Ops::allocPinned, &Ops::releasePinned>;

}  // namespace ds::runtime
