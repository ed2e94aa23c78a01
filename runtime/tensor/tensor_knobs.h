// The environment knobs runtime reads (the bf16 linear-layer and CUDA attention paths; restarts
// and fault injection, runtime/engine/fault_injection.h; the offload optimizer overlap,
// runtime/engine/device_mirror.h). Declarations only: read them with core/knobs.h's accessors.
#pragma once

#include "core/knobs.h"

// Declarations name only the fields they set (designated initializers; the rest keep their
// defaults), which GCC's -Wmissing-field-initializers would flag.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace ds::knobs {

// runtime/tensor/matmul_bf16.cc
inline constexpr Knob kBf16Linear{
    .name = "DS_BF16_LINEAR",
    .type = KnobType::kChoice,
    .dflt = "auto",
    .doc =
        "The bf16 model's linear-layer path: native (AVX512-BF16; an error on a CPU "
        "without it), widen (to fp32), or auto (measure both once per process). Empty "
        "counts as auto.",
    .readBy = kReadByDsrt,
    .choices = "auto|native|widen"};

// runtime/tensor/bf16_gemm.cc: read once per process, at the first bf16 gemm.
inline constexpr Knob kBf16Gemm{
    .name = "DS_BF16_GEMM",
    .type = KnobType::kChoice,
    .dflt = "auto",
    .doc =
        "The native bf16 gemm's kernel (the linear layers when DS_BF16_LINEAR picks native): "
        "amx (AMX tiles; an error on a CPU without AMX or when Linux refuses the tile state), "
        "avx512 (AVX512-BF16 vdpbf16ps) or auto (AMX where it can run, else AVX512-BF16). The "
        "two kernels round differently (last bits). Empty counts as auto.",
    .readBy = kReadByDsrt,
    .choices = "auto|amx|avx512"};

// runtime/tensor/cuda/attention_kernels.cu: read on every CudaOps attention call.
inline constexpr Knob kCudaAttention{
    .name = "DS_CUDA_ATTENTION",
    .type = KnobType::kChoice,
    .dflt = "auto",
    .doc =
        "The CUDA attention kernels: auto (tensor cores, mma.sync bf16 or fp16, where they "
        "apply: 16-bit storage, head size 64; the SIMT kernels otherwise), tc3 (the same as "
        "auto: tc2's "
        "forward, a backward in 32-query halves at 3 blocks per SM), tc2 (the second "
        "tensor-core kernels, cp.async pipelines, 128-query forward tiles), tc1 (the first "
        "tensor-core kernels, the fallback should tc2 misbehave; SIMT where they do not apply; "
        "tc2 and tc1 are bf16 only, fp16 runs SIMT under them) or simt (the fp32 SIMT kernels "
        "always). Empty counts as auto.",
    .readBy = kReadByDsrt,
    .choices = "auto|tc3|tc2|tc1|simt"};

// runtime/engine/trainer.cc: read once when a Trainer is built with fp16.enabled.
inline constexpr Knob kFp16Compute{
    .name = "DS_FP16_COMPUTE",
    .type = KnobType::kChoice,
    .dflt = "auto",
    .doc =
        "How fp16.enabled computes: auto (native on a GPU, emulated on the CPU), native (fp16 "
        "parameter copies and activations, fp16 cuBLASLt products with fp32 accumulation; GPU "
        "only, refused on the CPU) or emulated (fp32 kernels reading fp16-rounded weights, the "
        "CPU's only mode; docs/gpu.md \"Precision\"). Gradients are rounded to fp16 after each "
        "block's backward in both, so overflow skips the same way. Empty counts as auto.",
    .readBy = kReadByDsrt,
    .choices = "auto|native|emulated"};

// runtime/tensor/cuda/cuda_ops.cc: read when a CudaOps is made (makeCudaOps).
inline constexpr Knob kCudaGeluFusion{
    .name = "DS_CUDA_GELU_FUSION",
    .type = KnobType::kChoice,
    .dflt = "auto",
    .doc =
        "The GPT-2 MLP's GELU on CUDA: auto (fused into the cuBLASLt epilogues GELU_AUX_BIAS "
        "and DGELU where cuBLASLt offers them, the separate kernels otherwise) or off (the "
        "separate kernels always). Empty counts as auto.",
    .readBy = kReadByDsrt,
    .choices = "auto|off"};

// runtime/tensor/cuda/layernorm_kernels.cu: read on every CudaOps layernormBackward call.
inline constexpr Knob kCudaLayernormBwd{
    .name = "DS_CUDA_LAYERNORM_BWD",
    .type = KnobType::kChoice,
    .dflt = "auto",
    .doc =
        "The CUDA LayerNorm backward: auto (one fused pass, dinp and per-block dweight/dbias "
        "sums, then one small reduction, where it applies: bf16, C a multiple of 256 up to "
        "1024, all gradients given; the split kernels otherwise), fused (the same as auto) or "
        "split (a dinp kernel, then a dweight/dbias pass over dout and inp again: the previous "
        "path). Empty counts as auto.",
    .readBy = kReadByDsrt,
    .choices = "auto|fused|split"};

// runtime/cmd/train_command.cc: set by dsrun --max_restarts (launcher/restart_loop.h).
inline constexpr Knob kRestartAttempt{
    .name = "DS_RESTART_ATTEMPT",
    .type = KnobType::kInt,
    .dflt = "0",
    .doc =
        "Set by dsrun --max_restarts: which attempt of the job this is (0 the first). Above 0, "
        "dsrt train resumes from the latest complete checkpoint under train.checkpoint.dir "
        "(its --resume, or a fresh start, when none exists yet).",
    .readBy = kReadByDsrt,
    .lo = 0,
    .hi = 1000000};
// runtime/engine/fault_injection.cc: the fault tests (tests/e2e/fault_test.cc).
inline constexpr Knob kFaultKill{
    .name = "DS_FAULT_KILL",
    .type = KnobType::kString,
    .doc =
        "Fault injection for tests: 'rank=R,step=S[,at=step|save][,attempt=A|any]' makes dsrt "
        "train's rank R SIGKILL itself at the start of step S (at=step, the default) or in the "
        "checkpoint save after step S, once its own files are written and before `latest` moves "
        "(at=save), on restart attempt A (default 0; any: every attempt). Unset: nothing.",
    .readBy = kReadByDsrt};

// runtime/engine/trainer.cc: ZeRO-Offload on a device (the host engine + DeviceMirror).
inline constexpr Knob kOffloadOverlap{
    .name = "DS_OFFLOAD_OVERLAP",
    .type = KnobType::kBool,
    .dflt = "1",
    .doc =
        "Offload on a GPU, stages 1-2: the CPU optimizer runs in tiles (DS_OFFLOAD_OVERLAP_TILE, "
        "capped by sub_group_size) and each tile's updated parameters are uploaded on the copy "
        "stream while the next tiles update (the same bits); 0: update in one pass, then upload "
        "per block before its forward (the path before the overlap, for A/B timing).",
    .readBy = kReadByDsrt | kReadByBench};
inline constexpr Knob kOffloadOverlapTile{
    .name = "DS_OFFLOAD_OVERLAP_TILE",
    .type = KnobType::kInt,
    .dflt = "4194304",
    .doc =
        "Elements per optimizer tile when DS_OFFLOAD_OVERLAP is on (sub_group_size caps it): "
        "smaller tiles start the uploads sooner, larger ones cost fewer copies.",
    .readBy = kReadByDsrt | kReadByBench,
    .lo = 1024,
    .hi = int64_t(1) << 40};

// runtime/tensor/thread_policy.cc and blas_core.cc: the CPU thread policy and OpenBLAS's kernels.
inline constexpr Knob kOpenblasCoretype{
    .name = "OPENBLAS_CORETYPE",
    .type = KnobType::kString,
    .doc =
        "OpenBLAS: the kernel family to use. When unset and OpenBLAS picked a pre-AVX family on "
        "a CPU with AVX-512 (or AVX2+FMA), dsrt restarts itself once with SkylakeX (or Haswell) "
        "here; a value set by the user is kept.",
    .readBy = kReadByDsrt | kReadByBench,
    .origin = KnobOrigin::kThirdParty};
inline constexpr Knob kBlasCoreFrom{
    .name = "DS_BLAS_CORE_FROM",
    .type = KnobType::kString,
    .doc =
        "Set by dsrt itself when it restarted with OPENBLAS_CORETYPE: the kernel family "
        "OpenBLAS had picked (for the startup line); not set by hand.",
    .readBy = kReadByDsrt | kReadByBench};

// runtime/engine/trainer.cc: read once when a Trainer is built at ZeRO stage 3 on the host.
inline constexpr Knob kZero3VocabSplit{
    .name = "DS_ZERO3_VOCAB_SPLIT",
    .type = KnobType::kBool,
    .dflt = "1",
    .doc =
        "ZeRO stage 3 on the host (GPT-2, fp32, 2+ data-parallel ranks, no tensor or pipeline "
        "parallelism, offload_param none/cpu): 1 splits the tied wte by vocabulary rows over "
        "the data-parallel ranks (a MiCS shard group's ranks under mics_shard_size) and runs the "
        "embedding and LM head vocabulary-parallel, so no rank gathers wte or holds its full "
        "gradient; ZeRO++ (qwZ/qgZ/hpZ) then quantizes and partitions only the other "
        "parameters (docs/zero.md \"Stage 3 and the vocabulary\"); 0: gather wte whole like "
        "every other parameter (the path before, for A/B memory and loss comparisons).",
    .readBy = kReadByDsrt};

// runtime/engine/trainer.cc: read once when a Trainer is built at ZeRO stage 2 on the host.
inline constexpr Knob kZero2GradByRows{
    .name = "DS_ZERO2_GRAD_BY_ROWS",
    .type = KnobType::kBool,
    .dflt = "1",
    .doc =
        "ZeRO stage 2 on the host (GPT-2, no tensor or pipeline parallelism, not fp16, not bf16 "
        "on the native AVX512-BF16 kernels): 1 gives the tied wte's gradient to the engine in "
        "chunks of "
        "rows at the embedding's backward (the LM head's product deferred to it), each chunk "
        "reduced as its own bucket, so no rank holds wte's full gradient from the head's "
        "backward to the embedding's (the same sums up to sgemm rounding; docs/zero.md \"Stage 2 "
        "and the tied embedding\"); 0: the whole gradient as before (A/B memory comparisons).",
    .readBy = kReadByDsrt};

// runtime/cmd/serve_command.cc: a follower of tensor-parallel `dsrt serve` dies mid-request.
inline constexpr Knob kServeFaultKill{
    .name = "DS_SERVE_FAULT_KILL",
    .type = KnobType::kString,
    .doc =
        "Fault injection for tests: 'rank=R,forward=N' makes follower rank R (>= 1) of a "
        "tensor-parallel dsrt serve SIGKILL itself when rank 0 announces its N-th forward step. "
        "Unset: nothing.",
    .readBy = kReadByDsrt};

inline constexpr const Knob* kRuntimeKnobList[] = {
    &kBf16Linear,       &kBf16Gemm,       &kCudaAttention,  &kCudaGeluFusion,  &kCudaLayernormBwd,
    &kFp16Compute,      &kRestartAttempt, &kFaultKill,      &kOffloadOverlap,  &kOffloadOverlapTile,
    &kOpenblasCoretype, &kBlasCoreFrom,   &kServeFaultKill, &kZero3VocabSplit, &kZero2GradByRows};
inline constexpr KnobTable kRuntimeKnobs{"runtime", kRuntimeKnobList};

}  // namespace ds::knobs

#pragma GCC diagnostic pop
