// DeviceEngine (see device_engine.h): flat device buffers, gradient buckets reduced as backward
// finishes them, one fused optimizer launch per step.
#include "runtime/engine/device_engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "comm/process_group.h"
#include "core/error.h"
#include "runtime/engine/device_stage3.h"
#include "zero/grad_check.h"
#include "zero/partition.h"

namespace ds::runtime {
namespace {

using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

bool isAdam(const std::string& type) { return type == "Adam" || type == "AdamW"; }

// x moved into [lo, hi]: with x a partition bound, where that partition's part of [lo, hi) starts
// or ends.
size_t clampTo(size_t x, size_t lo, size_t hi) { return std::min(hi, std::max(lo, x)); }

}  // namespace

bool DeviceEngine::handles(const zero::ZeroOptions& zopts, const zero::OptimizerOptions& oopts) {
  return zopts.stage <= 3 && !zopts.offloadOptimizer.enabled() && !zopts.offloadParam.enabled() &&
         (isAdam(oopts.type) || oopts.type == "SGD");
}

DeviceEngine::DeviceEngine(Ops& ops, std::vector<zero::ParamInfo> params, comm::ProcessGroup* group,
                           const zero::ZeroOptions& zopts, const zero::OptimizerOptions& oopts)
    : ops_(ops), params_(std::move(params)), group_(group), zopts_(zopts), oopts_(oopts) {
  if (!handles(zopts_, oopts_))
    throw NotSupported(fmt::format(
        "device engine: ZeRO stage {} with offload_optimizer '{}', offload_param '{}', {} and "
        "optimizer {} runs on the host engine, not this one",
        zopts_.stage, zopts_.offloadOptimizer.device, zopts_.offloadParam.device,
        dtypeName(zopts_.compute), oopts_.type));
  if (group_ != nullptr) {
    rank_ = group_->rank();
    world_ = group_->size();
  }
  half_ = zopts_.compute == DType::kBF16 || zopts_.compute == DType::kF16;
  adam_ = isAdam(oopts_.type);
  for (const auto& p : params_) numel_ += p.numel;
  const size_t n = params_.size();
  table_.value.assign(n, nullptr);
  table_.value16.assign(n, nullptr);
  table_.grad.assign(n, nullptr);
  if (zopts_.stage > 0 && reducing())
    normBuf_ =
        OpsBuffer(ops_, (2 + 2 * size_t(world_)) * sizeof(float), "gradient norm all-gather");
  if (zopts_.stage == 3) {
    initStage3();
    return;
  }
  shard_ = zopts_.stage == 0 ? numel_ : (numel_ + size_t(world_) - 1) / size_t(world_);
  partIndex_ = zopts_.stage == 0 ? 0 : rank_;  // stage 0: every rank updates everything
  lo_ = partBegin();
  part_ = partEnd() - lo_;
  shards_ = {{lo_, 0, part_}};

  params32_ =
      OpsBuffer(ops_, numel_ * sizeof(float), half_ ? "fp32 master parameters" : "fp32 parameters");
  if (half_)
    params16_ = OpsBuffer(ops_, numel_ * sizeof(uint16_t),
                          fmt::format("{} parameters", dtypeName(zopts_.compute)));
  grads_ = OpsBuffer(ops_, numel_ * sizeof(float), "fp32 gradients");
  ops_.zero(grads_.get(), grads_.bytes());
  const size_t nstates = adam_ ? 2 : (oopts_.momentum != 0.f ? 1 : 0);
  if (zopts_.stage > 0 && world_ > 1)
    gatherIn_ = OpsBuffer(ops_, part_ * sizeof(float),  // fp32: getParams gathers the master
                          "parameter all-gather input");
  if (nstates > 0) {
    states_ = OpsBuffer(ops_, nstates * part_ * sizeof(float), "optimizer states");
    ops_.zero(states_.get(), states_.bytes());
  }

  // The partition as runs of equal decay, relative to lo_.
  size_t offset = 0;
  for (const auto& p : params_) {
    const size_t lo = std::max(offset, partBegin()), hi = std::min(offset + p.numel, partEnd());
    if (lo < hi) {
      if (!ranges_.empty() && ranges_.back().decay == p.decay &&
          ranges_.back().offset + ranges_.back().size == lo - lo_)
        ranges_.back().size += hi - lo;
      else ranges_.push_back({lo - lo_, hi - lo, p.decay});
    }
    offset += p.numel;
  }

  offset = 0;
  for (size_t i = 0; i < n; ++i) {
    // fp16 bits behind the bf16 pointer type when computing in fp16 (param_table.h).
    if (half_) table_.value16[i] = params16_.as<const bf16>() + offset;
    else table_.value[i] = params32_.as<float>() + offset;
    table_.grad[i] = grads_.as<float>() + offset;
    offset += params_[i].numel;
  }
  initBuckets();
}

// Stage 3: every buffer holds this rank's partition only, laid out as the host engine's
// (zero::Stage3Layout: chunk p of every parameter p at its local offset, zero padding after a
// parameter's last real element); the table's pointers are DeviceStage3's to set.
void DeviceEngine::initStage3() {
  const zero::Stage3Layout layout(params_, world_);
  part_ = layout.localSize();
  offsets_ = zero::paramOffsets(params_);
  for (size_t p = 0; p < params_.size(); ++p) {
    const zero::Shard own = layout.ownRange(p, rank_);
    if (own.size == 0) continue;
    shards_.push_back({offsets_[p] + own.offset, layout.localOffset(p), own.size});
    const size_t local = layout.localOffset(p);
    if (!ranges_.empty() && ranges_.back().decay == params_[p].decay &&
        ranges_.back().offset + ranges_.back().size == local)
      ranges_.back().size += own.size;
    else ranges_.push_back({local, own.size, params_[p].decay});
  }
  params32_ = OpsBuffer(ops_, part_ * sizeof(float),
                        half_ ? "fp32 master parameter partition" : "fp32 parameter partition");
  ops_.zero(params32_.get(), params32_.bytes());
  if (half_) {
    params16_ = OpsBuffer(ops_, part_ * sizeof(uint16_t),
                          fmt::format("{} parameter partition", dtypeName(zopts_.compute)));
    ops_.zero(params16_.get(), params16_.bytes());
  }
  grads_ = OpsBuffer(ops_, part_ * sizeof(float), "fp32 gradient partition");
  ops_.zero(grads_.get(), grads_.bytes());
  const size_t nstates = adam_ ? 2 : (oopts_.momentum != 0.f ? 1 : 0);
  if (nstates > 0) {
    states_ = OpsBuffer(ops_, nstates * part_ * sizeof(float), "optimizer states");
    ops_.zero(states_.get(), states_.bytes());
  }
  DeviceStage3::Partition part;
  part.params = half_ ? params16_.get() : params32_.get();
  part.grads = grads_.as<float>();
  stage3_ = std::make_unique<DeviceStage3>(ops_, params_, group_, zopts_, table_, tracer_, part);
}

void DeviceEngine::initBuckets() {
  const size_t n = params_.size();
  offsets_.assign(n, 0);
  reduced_.assign(n, 0);
  for (size_t i = 1; i < n; ++i) offsets_[i] = offsets_[i - 1] + params_[i - 1].numel;
  for (size_t i = n; i-- > 0;) {
    const auto& blocks = params_[i].blocks;
    if (blocks.empty()) continue;  // never final in a hook: step() reduces it
    const int first = *std::min_element(blocks.begin(), blocks.end());
    if (first < 0)
      throw ConfigError(
          fmt::format("device engine: parameter '{}' lists block {}", params_[i].name, first));
    if (finalAt_.size() <= size_t(first)) finalAt_.resize(size_t(first) + 1);
    finalAt_[size_t(first)].push_back(i);
  }
  // MPI_Reduce_scatter may not write into its own input on host memory (staged device buffers
  // get separate host copies; gloo and NCCL take the rank's own block of the input as output).
  inPlaceRs_ = group_ == nullptr || ops_.onDevice() || group_->backendName() != "mpi";
}

DeviceEngine::~DeviceEngine() {
  // An exception left buckets in flight: the collectives still write grads_, which dies with us.
  for (auto& f : inFlight_) {
    try {
      f.work->wait();
    } catch (...) {  // the failure was (or will be) reported where it happened
    }
  }
}

void DeviceEngine::beforeForward(int block) {
  tracer_.note(zero::TraceEvent::Kind::kBeforeForward, block);
  if (stage3_) stage3_->beforeForward(block);
}

void DeviceEngine::afterForward(int block) {
  tracer_.note(zero::TraceEvent::Kind::kAfterForward, block);
  if (stage3_) stage3_->afterForward(block);
}

void DeviceEngine::beforeBackward(int block) {
  tracer_.note(zero::TraceEvent::Kind::kBeforeBackward, block);
  if (stage3_) stage3_->beforeBackward(block);
}

// No ops_.synchronize(): NCCL's stream waits on an event of the default stream, where the
// backward's kernels run; staged gloo/mpi copies (cudaMemcpy) order after it too; CpuOps are
// synchronous.
void DeviceEngine::afterBackward(int block) {
  tracer_.note(zero::TraceEvent::Kind::kAfterBackward, block);
  if (stage3_) {
    stage3_->afterBackward(block);
    return;
  }
  if (block < 0) return;
  if (reducing() && (lastMicro_ || reduceEveryMicroStep())) {
    if (size_t(block) < finalAt_.size())
      for (size_t param : finalAt_[size_t(block)]) addToBucket(param);
    if (block == 0) flushBucket();  // backward is over
  }
  if (block == 0 && !lastMicro_ && reduceEveryMicroStep()) foldMicroStep();
}

// Stage 2 reduces every micro-step (DeepSpeed's stage 2; the host's FlatPartitionedStage): this
// micro-step's reduced partition joins the earlier ones' in gradAcc_ (fp32), and grads_ starts
// the next micro-step at zero, so no rank's gradient accumulates across micro-steps before the
// reduction (in fp16 mode each micro-step's gradient is rounded on its own, as on the host).
// One rank: no reduction, the partition is the whole buffer (as the host's reduceSingle).
void DeviceEngine::foldMicroStep() {
  if (reducing()) {
    for (size_t i = params_.size(); i-- > 0;) addToBucket(i);  // what no hook finished
    flushBucket();
    waitBuckets();
  }
  float* own = grads_.as<float>() + lo_;
  if (gradAcc_.get() == nullptr)
    gradAcc_ = OpsBuffer(ops_, std::max<size_t>(part_, 1) * sizeof(float),
                         "stage-2 gradient partition accumulated over micro-steps");
  if (accumulated_) ops_.residualForward(gradAcc_.get(), gradAcc_.get(), own, part_, DType::kF32);
  else ops_.copy(gradAcc_.get(), own, part_ * sizeof(float));
  accumulated_ = true;
  ops_.zero(grads_.get(), grads_.bytes());
  ops_.synchronize();
}

float* DeviceEngine::master() const { return params32_.as<float>(); }

float* DeviceEngine::state(size_t k) const { return states_.as<float>() + k * part_; }

std::vector<std::string> DeviceEngine::stateNames() const {
  if (adam_) return {"fp32", "exp_avg", "exp_avg_sq"};
  return {"fp32", "momentum"};
}

void DeviceEngine::setParamsFrom(const ParamSource& source) {
  // The runs to fill: stage 3 this rank's shards (local offsets), else the whole flat space.
  std::vector<ShardRange> runs = stage3_ ? shards_ : std::vector<ShardRange>{{0, 0, numel_}};
  std::vector<float> piece;
  for (const auto& r : runs)
    for (size_t done = 0; done < r.size; done += kParamSourcePiece) {
      const size_t count = std::min(kParamSourcePiece, r.size - done);
      piece.resize(count);
      source(r.flat + done, count, piece.data());
      ops_.upload(master() + r.local + done, piece.data(), count * sizeof(float));
      ops_.synchronize();  // the piece buffer is reused
    }
  if (half_) toHalf(0, stage3_ ? part_ : numel_);
  if (stage3_) stage3_->refresh();
  ops_.synchronize();
}

// Stage 3: one all-gather of the fp32 master per parameter (as the host engine) through a buffer
// of the largest parameter; collective.
void DeviceEngine::getParamsStage3(float* fullFlat) {
  const zero::Stage3Layout& layout = stage3_->layout();
  const size_t world = size_t(world_);
  size_t most = 0;
  for (size_t p = 0; p < params_.size(); ++p) most = std::max(most, layout.chunk(p) * world);
  OpsBuffer all(ops_, most * sizeof(float), "stage-3 getParams gather buffer");
  const comm::Device where = ops_.onDevice() ? comm::Device::kCuda : comm::Device::kCpu;
  for (size_t p = 0; p < params_.size(); ++p) {
    const size_t chunk = layout.chunk(p);
    float* mine = master() + layout.localOffset(p);
    if (reducing())
      group_
          ->allgather({mine, chunk, DType::kF32, where},
                      {all.get(), chunk * world, DType::kF32, where},
                      std::vector<size_t>(world, chunk))
          ->wait();
    else ops_.copy(all.get(), mine, chunk * sizeof(float));
    ops_.download(fullFlat + offsets_[p], all.get(), params_[p].numel * sizeof(float));
  }
}

void DeviceEngine::getParams(float* fullFlat) {
  if (stage3_) {
    getParamsStage3(fullFlat);
    return;
  }
  // bf16 at stages 1-2: only this rank's part of the fp32 master is current; gather the rest.
  if (half_ && gatherIn_.get() != nullptr) gather(master(), DType::kF32);
  ops_.download(fullFlat, master(), numel_ * sizeof(float));
}

void DeviceEngine::addToBucket(size_t param) {
  if (reduced_[param]) return;
  reduced_[param] = 1;
  const size_t lo = offsets_[param], hi = lo + params_[param].numel;
  if (lo == hi) return;
  const size_t cap = std::max<size_t>(zopts_.reduceBucketSize, 1);
  if (openLo_ != openHi_) {
    const bool adjacent = hi == openLo_ || lo == openHi_;
    if (!adjacent || openHi_ - openLo_ + (hi - lo) > cap) flushBucket();
  }
  if (openLo_ == openHi_) {
    openLo_ = lo;
    openHi_ = hi;
  } else {
    openLo_ = std::min(openLo_, lo);
    openHi_ = std::max(openHi_, hi);
  }
  if (openHi_ - openLo_ >= cap) flushBucket();
}

void DeviceEngine::flushBucket() {
  if (openLo_ == openHi_) return;
  issueBucket(openLo_, openHi_);
  openLo_ = openHi_ = 0;
}

// Stage 0 (or MPI on host memory, see initBuckets): allreduce of the range. Stages 1-2: reduce-
// scatter with block r = the range's overlap with rank r's partition; this rank's reduced block
// lands in place, at its own offsets in grads_.
void DeviceEngine::issueBucket(size_t lo, size_t hi) {
  const comm::Device where = ops_.onDevice() ? comm::Device::kCuda : comm::Device::kCpu;
  float* g = grads_.as<float>();
  const bool allreduce = zopts_.stage == 0 || !inPlaceRs_;
  comm::WorkPtr work;
  if (allreduce) {
    work = group_->allreduce({g + lo, hi - lo, DType::kF32, where}, comm::ReduceOp::kSum);
  } else {
    std::vector<size_t> counts(static_cast<size_t>(world_));
    for (int r = 0; r < world_; ++r)
      counts[size_t(r)] = clampTo(std::min(numel_, size_t(r + 1) * shard_), lo, hi) -
                          clampTo(std::min(numel_, size_t(r) * shard_), lo, hi);
    const size_t own = clampTo(partBegin(), lo, hi);
    work = group_->reduceScatter({g + lo, hi - lo, DType::kF32, where},
                                 {g + own, counts[size_t(rank_)], DType::kF32, where}, counts,
                                 comm::ReduceOp::kSum);
  }
  tracer_.note(zero::TraceEvent::Kind::kBucketIssued, bucketNumber_, false, allreduce);
  inFlight_.push_back({std::move(work), bucketNumber_++});
}

void DeviceEngine::reduceGrads() {
  if (reducing()) {
    for (size_t i = params_.size(); i-- > 0;) addToBucket(i);  // what no hook finished
    flushBucket();
    waitBuckets();
  }
  if (accumulated_) {  // stage 2: the earlier micro-steps' reduced partitions
    float* own = grads_.as<float>() + lo_;
    ops_.residualForward(own, gradAcc_.get(), own, part_, DType::kF32);
    accumulated_ = false;
  }
}

void DeviceEngine::waitBuckets() {
  for (auto& f : inFlight_) {
    tracer_.note(zero::TraceEvent::Kind::kBucketWaited, f.number, f.work->isCompleted());
    f.work->wait();
  }
  inFlight_.clear();
  std::fill(reduced_.begin(), reduced_.end(), 0);
}

void DeviceEngine::gather(void* full, DType dt) {
  const comm::Device where = ops_.onDevice() ? comm::Device::kCuda : comm::Device::kCpu;
  std::vector<size_t> counts(static_cast<size_t>(world_));
  for (int r = 0; r < world_; ++r)
    counts[size_t(r)] =
        std::min(numel_, size_t(r + 1) * shard_) - std::min(numel_, size_t(r) * shard_);
  const size_t elem = dtypeSize(dt), lo = partBegin();
  ops_.copy(gatherIn_.get(), static_cast<char*>(full) + lo * elem, counts[size_t(rank_)] * elem);
  ops_.synchronize();
  group_
      ->allgather({gatherIn_.get(), counts[size_t(rank_)], dt, where}, {full, numel_, dt, where},
                  counts)
      ->wait();
}

void DeviceEngine::toHalf(size_t offset, size_t count) {
  if (zopts_.compute == DType::kF16)
    ops_.toFp16(params16_.as<fp16>() + offset, master() + offset, count);
  else ops_.toBf16(params16_.as<bf16>() + offset, master() + offset, count);
}

void DeviceEngine::allgatherParams() {
  if (gatherIn_.get() == nullptr) return;
  // bf16/fp16: the 16-bit copy is what the model reads; the fp32 master stays partitioned.
  if (half_) gather(params16_.get(), zopts_.compute);
  else gather(master(), DType::kF32);
}

// As the host engine's zero::checkGradients: every rank's double travels as two fp32 words (an
// all-gather copies bytes, no arithmetic) and the sum runs in rank order, so both engines get the
// same norm. Through the Ops' memory: NCCL takes no host buffers.
double DeviceEngine::globalSumSquares(double local) {
  const comm::Device where = ops_.onDevice() ? comm::Device::kCuda : comm::Device::kCpu;
  const size_t world = size_t(world_);
  float* buf = normBuf_.as<float>();  // [2] this rank's words, then [2 * world] everyone's
  ops_.upload(buf, &local, sizeof(double));
  group_
      ->allgather({buf, 2, DType::kF32, where}, {buf + 2, 2 * world, DType::kF32, where},
                  std::vector<size_t>(world, 2))
      ->wait();
  std::vector<double> all(world);
  ops_.download(all.data(), buf + 2, world * sizeof(double));
  return std::accumulate(all.begin(), all.end(), 0.0);
}

zero::StepResult DeviceEngine::step(float learningRate, float lossScale, float clipNorm) {
  zero::StepResult result;
  auto t0 = Clock::now();
  if (stage3_) stage3_->finish();
  else reduceGrads();
  const size_t lo = lo_, part = part_;
  double sumSquares = ops_.sumSquares(grads_.as<float>() + lo, part);
  if (zopts_.stage > 0 && reducing()) sumSquares = globalSumSquares(sumSquares);
  result.commMs = msSince(t0);
  zero::GradCheck check;
  check.sumSquares = sumSquares;
  check.norm = float(std::sqrt(sumSquares) / double(world_) / double(lossScale));
  result.gradNorm = check.norm;
  auto t1 = Clock::now();
  if (!check.finite()) {
    result.skipped = true;
  } else {
    ++steps_;
    const float multiplier = zero::gradientMultiplier(check, clipNorm, world_, lossScale);
    // bf16: written by the optimizer's pass; fp16: converted just after it (toHalf).
    bf16* out16 = zopts_.compute == DType::kBF16 ? params16_.as<bf16>() + lo : nullptr;
    if (adam_) {
      AdamStep s;
      s.lr = learningRate;
      s.beta1 = oopts_.beta1;
      s.beta2 = oopts_.beta2;
      s.eps = oopts_.eps;
      s.weightDecay = oopts_.weightDecay;
      s.adamw = oopts_.adamwMode;
      s.biasCorrection = oopts_.biasCorrection;
      s.step = steps_;
      s.gradScale = multiplier;
      ops_.adam(master() + lo, state(0), state(1), grads_.as<float>() + lo, out16, ranges_.data(),
                int(ranges_.size()), s);
    } else {
      SgdStep s;
      s.lr = learningRate;
      s.momentum = oopts_.momentum;
      s.weightDecay = oopts_.weightDecay;
      s.gradScale = multiplier;
      ops_.sgd(master() + lo, oopts_.momentum != 0.f ? state(0) : nullptr, grads_.as<float>() + lo,
               out16, ranges_.data(), int(ranges_.size()), s);
    }
    if (zopts_.compute == DType::kF16) toHalf(lo, part);
  }
  result.optimMs = msSince(t1);
  auto t2 = Clock::now();
  if (!result.skipped) {
    if (stage3_) stage3_->refresh();
    else allgatherParams();
  }
  ops_.zero(grads_.get(), grads_.bytes());
  ops_.synchronize();
  lastMicro_ = true;  // as ZeroEngine: the next step is announced again (or is one micro-step)
  result.commMs += msSince(t2);
  return result;
}

zero::MemoryReport DeviceEngine::memory() const {
  zero::MemoryReport report;
  const auto dev = int(zero::MemPlace::kDevice);
  report.bytes[int(zero::MemKind::kParams)][dev] = half_ ? params16_.bytes() : params32_.bytes();
  if (stage3_) {  // the partition, plus the persistent parameters gathered whole
    report.bytes[int(zero::MemKind::kParams)][dev] += stage3_->persistentBytes();
    report.bytes[int(zero::MemKind::kBuffers)][dev] = stage3_->bufferBytes();
  }
  // stage 2 with accumulation: plus the partition summed over micro-steps (from the first one)
  report.bytes[int(zero::MemKind::kGrads)][dev] = grads_.bytes() + gradAcc_.bytes();
  // The fp32 master counts as an optimizer state in bf16 mode (zero.md's K = 12 per element).
  report.bytes[int(zero::MemKind::kOptimizerStates)][dev] =
      states_.bytes() + (half_ ? params32_.bytes() : 0);
  return report;
}

// One tensor per state and run of the partition (stage 3: per parameter, as the host engine).
std::vector<DeviceEngine::ShardTensor> DeviceEngine::optimizerShard() const {
  std::vector<ShardTensor> shard;
  const auto names = stateNames();
  for (size_t k = 0; k < names.size(); ++k)
    for (const auto& r : shards_) {
      ShardTensor tensor{names[k], r.flat, r.size, std::vector<float>(r.size)};
      if (r.size > 0) {
        if (k == 0)
          ops_.download(tensor.data.data(), master() + lo_ + r.local, r.size * sizeof(float));
        else if (states_.get() != nullptr)
          ops_.download(tensor.data.data(), state(k - 1) + r.local, r.size * sizeof(float));
      }
      shard.push_back(std::move(tensor));
    }
  return shard;
}

void DeviceEngine::loadOptimizerState(
    const std::function<void(size_t, size_t, const std::string&, float*)>& readRange,
    int64_t stepCount) {
  if (stage3_) stage3_->finish();  // nothing may still add into the gradients
  const auto names = stateNames();
  std::vector<float> values;
  for (size_t k = 0; k < names.size(); ++k)
    for (const auto& r : shards_) {
      if (r.size == 0 || (k > 0 && states_.get() == nullptr)) continue;
      values.resize(r.size);
      readRange(r.flat, r.size, names[k], values.data());
      ops_.upload(k == 0 ? master() + lo_ + r.local : state(k - 1) + r.local, values.data(),
                  r.size * sizeof(float));
    }
  steps_ = stepCount;
  if (half_) toHalf(lo_, part_);
  if (stage3_) stage3_->refresh();
  else allgatherParams();
  ops_.synchronize();
}

}  // namespace ds::runtime
