// ZeroOptions / OffloadOptions / OptimizerOptions: the engine's knobs, one named field per
// DeepSpeed config key (the comment names the key; runtime/config fills them from the plan). Not
// the parser or the schema (runtime/config). Invariant: validateZeroOptions() accepts exactly
// the combinations the stages implement; every refusal names the config key.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "zero/async_file.h"

namespace ds::zero {

// aio: how the NVMe swap files do their I/O. 0 = dsrun's default when the config has no aio block
// (requests up to Linux's maximum size, 64 in flight); the aio block gives DeepSpeed's defaults.
struct AioOptions {
  size_t blockSize = 0;  // block_size: bytes per read/write request (rounded down to 4 KiB)
  int queueDepth = 0;    // queue_depth: requests in flight per swap file
};

// zero_optimization.offload_optimizer / zero_optimization.offload_param
struct OffloadOptions {
  std::string device = "none";  // device: none | cpu | nvme
  std::string nvmePath;         // nvme_path: directory for swap files (nvme)
  bool pinMemory = false;       // pin_memory: mlock the host buffers (best effort)
  int bufferCount = 4;          // buffer_count: nvme tiles in flight (>= 3: read k+1, update k,
                                // write k-1)
  AioOptions aio;               // the top-level aio block (same in both offload blocks)
  bool enabled() const { return device != "none"; }
};

// zero_optimization
struct ZeroOptions {
  int stage = 0;                              // stage: 0..3
  size_t reduceBucketSize = 500000000;        // reduce_bucket_size (elements)
  size_t allgatherBucketSize = 500000000;     // allgather_bucket_size (elements; stage 1/2
                                              // param allgather chunks)
  bool overlapComm = false;                   // overlap_comm: buckets reduced asynchronously
  bool reduceScatter = true;                  // reduce_scatter: false = stage 1/2 buckets are
                                              // allreduced
  bool contiguousGradients = true;            // contiguous_gradients: only true (grads are
                                              // copied into the bucket buffer at stage 2/3);
                                              // false is a ConfigError
  size_t prefetchBucketSize = 50000000;       // stage3_prefetch_bucket_size (elements)
  size_t paramPersistenceThreshold = 100000;  // stage3_param_persistence_threshold: params
                                              // <= this stay gathered
  size_t maxLiveParameters = 1000000000;      // stage3_max_live_parameters: cap on gathered
                                              // (non-persistent) elements
  size_t subGroupSize = 1000000000;           // sub_group_size: optimizer tile (elements) for
                                              // offload/nvme
  bool quantizedWeights = false;              // zero_quantized_weights (ZeRO++ qwZ, stage 3):
                                              // parameters all-gathered as block int8
  bool quantizedGradients = false;            // zero_quantized_gradients (ZeRO++ qgZ, stage 3):
                                              // gradients reduce-scattered as block int8
  int hpzPartitionSize = 1;                   // zero_hpz_partition_size (ZeRO++ hpZ, stage 3):
                                              // backward gathers within groups of this many
                                              // consecutive ranks
  int micsShardSize = -1;                     // mics_shard_size (MiCS, stage 3): partition over
                                              // groups of this many consecutive ranks,
                                              // replicated across groups; -1 = the whole world
  bool micsHierarchicalParamsGather = false;  // mics_hierarchical_params_gather (accepted; a
                                              // shard group across hosts gathers
                                              // hierarchically anyway, see docs/comm.md)
  OffloadOptions offloadOptimizer;            // offload_optimizer
  OffloadOptions offloadParam;                // offload_param (stage 3)
  DType compute = DType::kF32;                // from bf16/fp16.enabled: kF32, kBF16 or kF16
  bool halfCompute() const { return compute != DType::kF32; }
};

// optimizer {type, params}
struct OptimizerOptions {
  // type: Adam | AdamW | SGD | Lamb | OneBitAdam | ZeroOneAdam | OneBitLamb
  std::string type = "AdamW";
  // params: lr, betas, eps, weight_decay, momentum
  float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weightDecay = 0.f, momentum = 0.f;
  bool adamwMode = true;       // adam_w_mode: Adam is L2 (false) unless type == "AdamW"
  bool biasCorrection = true;  // bias_correction
  // Lamb (DeepSpeed's FusedLamb): trust ratio clamp and where eps goes
  float maxCoeff = 10.f, minCoeff = 0.01f;  // max_coeff, min_coeff
  bool epsInsideSqrt = false;               // eps_inside_sqrt
  // OneBitAdam / ZeroOneAdam / OneBitLamb (zero/onebit_adam.h, zero/onebit_lamb.h; DeepSpeed's
  // defaults)
  int64_t freezeStep = 100000;      // freeze_step: exact steps before 1-bit momentum
  int64_t varFreezeStep = 100000;   // var_freeze_step: last step that may update the variance
  int64_t varUpdateScaler = 16;     // var_update_scaler: variance updates per interval doubling
  int64_t localStepScaler = 32678;  // local_step_scaler: steps per local-interval doubling
  int64_t localStepClipper = 16;    // local_step_clipper: largest local-step interval
  bool cudaAware = false;           // cuda_aware (MPI only; host buffers here: no effect)
  std::string commBackendName = "nccl";  // comm_backend_name: nccl | mpi | gloo (the job's group)
  // OneBitLamb: the frozen trust ratio's average and the factor rules of its compressed steps
  float coeffBeta = 0.9f;        // coeff_beta: EMA of the warm-up's trust ratios
  float factorMax = 4.f;         // factor_max: largest scaling of the frozen coefficient
  float factorMin = 0.5f;        // factor_min: smallest scaling
  float factorThreshold = 0.1f;  // factor_threshold: largest relative change per step
  bool compressed() const {
    return type == "OneBitAdam" || type == "ZeroOneAdam" || type == "OneBitLamb";
  }
};

// AsyncFile options for the aio block (AioOptions zeros keep AsyncFile's defaults).
AsyncFile::Options asyncFileOptions(const AioOptions& aio);

// The reduce bucket a stage 2/3 rank actually allocates (elements): reduce_bucket_size clamped to
// an eighth of this rank's gradient partition (never below 1 Mi elements) and to the flat space.
// DeepSpeed's default (5e8) is sized for GPU memory next to multi-billion models; on a smaller
// model it turns into buffers the size of the whole model (two with overlap_comm), more than
// stage 2 saves over stage 1. An eighth of the partition keeps each bucket large enough for the
// collective's bandwidth and the buffers under a quarter of the gradient partition.
size_t effectiveReduceBucket(size_t reduceBucketSize, size_t partitionElems, size_t flatElems);

// Throws ConfigError naming the key for a stage, dtype or offload combination no stage supports.
void validateZeroOptions(const ZeroOptions& options);

}  // namespace ds::zero
