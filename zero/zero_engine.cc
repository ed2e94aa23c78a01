// ZeroEngine: construction and layout per stage, parameter I/O, the optimizer step, memory
// accounting and optimizer-state checkpoints. The per-block hooks live in zero_hooks.cc.
#include "zero/zero_engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>

#include "core/error.h"
#include "core/log.h"
#include "zero/zero_engine_impl.h"

namespace ds::zero {
namespace {

double msSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

void validate(const std::vector<ParamInfo>& params, int numBlocks, const ZeroOptions& z) {
  if (z.stage < 0 || z.stage > 3)
    throw ConfigError(fmt::format("zero_optimization.stage: {} (Maximum supported ZeRO stage is 3)",
                                  z.stage));
  if (z.compute != DType::kF32 && z.compute != DType::kBF16 && z.compute != DType::kF16)
    throw ConfigError(fmt::format("ZeroEngine: compute dtype {} (expected fp32, bf16 or fp16)",
                                  dtypeName(z.compute)));
  if (z.offloadParam.device != "none" && z.stage != 3)
    throw ConfigError(fmt::format(
        "zero_optimization.offload_param.device '{}': parameter offload needs stage 3 (stage is {})",
        z.offloadParam.device, z.stage));
  if (z.offloadParam.device != "none" && z.offloadParam.device != "cpu" &&
      z.offloadParam.device != "nvme")
    throw ConfigError("zero_optimization.offload_param.device '" + z.offloadParam.device +
                      "': expected none, cpu or nvme");
  if (z.offloadOptimizer.device != "none" && z.stage == 0)
    throw ConfigError("zero_optimization.offload_optimizer: needs ZeRO stage 1, 2 or 3 (stage is 0)");
  if (z.reduceBucketSize == 0) throw ConfigError("zero_optimization.reduce_bucket_size: must be > 0");
  if (!z.reduceScatter && z.stage == 3)
    throw ConfigError(
        "zero_optimization.reduce_scatter: false is supported at stages 0-2 only (stage 3 always "
        "reduce-scatters its per-parameter gradients)");
  if (!z.contiguousGradients)
    throw ConfigError(
        "zero_optimization.contiguous_gradients: false is not supported (stages 2 and 3 always "
        "copy finished gradients into contiguous bucket buffers; use true)");
  if (numBlocks < 1) throw ConfigError("ZeroEngine: numBlocks must be >= 1");
  for (const auto& p : params) {
    if (p.numel == 0) throw ConfigError("ZeroEngine: parameter '" + p.name + "' has 0 elements");
    if (!p.shape.empty()) {
      int64_t prod = 1;
      for (auto d : p.shape) prod *= d;
      if (size_t(prod) != p.numel)
        throw ConfigError(fmt::format("ZeroEngine: parameter '{}' numel {} != product of shape {}",
                                      p.name, p.numel, prod));
    }
    if (p.blocks.empty()) throw ConfigError("ZeroEngine: parameter '" + p.name + "' has no block");
    for (int b : p.blocks)
      if (b < 0 || b >= numBlocks)
        throw ConfigError(fmt::format("ZeroEngine: parameter '{}' names block {} (numBlocks {})",
                                      p.name, b, numBlocks));
  }
}

}  // namespace

ZeroEngine::Impl::Impl(std::vector<ParamInfo> ps, int nb, comm::ProcessGroup* group,
                       ZeroOptions zo, OptimizerOptions oo)
    : params(std::move(ps)), numBlocks(nb), comm(group), z(std::move(zo)), o(std::move(oo)) {
  validate(params, numBlocks, z);
  world = comm.world();
  rank = comm.rank();
  bf16 = z.compute != DType::kF32;
  numel = totalNumel(params);
  off = paramOffsets(params);
  const size_t P = params.size();
  lowest.resize(P);
  blockParams.resize(size_t(numBlocks));
  completeAt.resize(size_t(numBlocks));
  for (size_t p = 0; p < P; ++p) {
    auto bs = params[p].blocks;
    std::sort(bs.begin(), bs.end());
    bs.erase(std::unique(bs.begin(), bs.end()), bs.end());
    lowest[p] = bs.front();
    for (int b : bs) blockParams[size_t(b)].push_back(p);
    completeAt[size_t(lowest[p])].push_back(p);
  }
  table.value.assign(P, nullptr);
  table.value16.assign(P, nullptr);
  table.grad.assign(P, nullptr);
  complete.assign(P, 0);
  pgrad.resize(P);
  const size_t es16 = 2;
  (void)es16;

  if (z.stage < 3) {
    flat = std::make_unique<FlatLayout>(numel, world);
    if (bf16) full16.assign(flat->padded(), 0);
    else full32.assign(flat->padded(), 0.f);
    if (z.stage <= 1) fullGrad.assign(flat->padded(), 0.f);
    for (size_t p = 0; p < P; ++p) {
      if (bf16) table.value16[p] = reinterpret_cast<const ds::bf16*>(full16.data() + off[p]);
      else table.value[p] = full32.data() + off[p];
      if (z.stage <= 1) table.grad[p] = fullGrad.data() + off[p];
    }
    if (z.stage == 0) {
      Lp = optCount = numel;
      partStart = 0;
      ranges.push_back({0, 0, numel});
    } else {
      partStart = flat->paddedShard(rank).offset;
      Lp = flat->partSize();
      Shard real = flat->realShard(rank);
      optCount = real.size;
      if (real.size) ranges.push_back({real.offset, real.offset - partStart, real.size});
      agChunk = std::max<size_t>(1, z.allgatherBucketSize / size_t(world));
      if (agChunk < Lp) agStage.assign(agChunk * size_t(world) * (bf16 ? 1 : 2), 0);
    }
  } else {
    s3 = std::make_unique<Stage3Layout>(params, world);
    Lp = optCount = s3->localSize();
    if (z.offloadParam.device == "nvme")
      pswap = std::make_unique<ParamSwap>(z.offloadParam.nvmePath, rank, Lp * (bf16 ? 2 : 4),
                                          z.offloadParam.pinMemory);
    else if (bf16) part16.assign(Lp, 0);
    else part32.assign(Lp, 0.f);
    live32.resize(P);
    live16.resize(P);
    gatherWork.resize(P);
    gathering.assign(P, 0);
    persistent.assign(P, 0);
    for (size_t p = 0; p < P; ++p) {
      persistent[p] = params[p].numel <= z.paramPersistenceThreshold;
      Shard own = s3->ownRange(p, rank);
      if (own.size) ranges.push_back({off[p] + own.offset, s3->localOffset(p), own.size});
    }
  }
  if (z.stage >= 2) gradPart.assign(Lp, 0.f);

  const int slots = z.overlapComm ? 2 : 1;
  bucketElems = std::max<size_t>(z.reduceBucketSize, 1);
  if (z.stage >= 1) {
    size_t cap = z.stage == 3 ? std::min(bucketElems, Lp * size_t(world))
                              : std::min(bucketElems, flat->padded());
    bucketIn.resize(size_t(slots));
    bucketOut.resize(size_t(slots));
    for (int s = 0; s < slots; ++s) {
      if (z.stage >= 2) bucketIn[size_t(s)].assign(cap, 0.f);
      bucketOut[size_t(s)].assign(z.stage == 3 ? (cap + size_t(world) - 1) / size_t(world)
                                               : std::min(cap, Lp), 0.f);
    }
  }
  slotBusy.assign(size_t(slots), 0);
  resetMicroStep();
  buildOptimizer();
}

void ZeroEngine::Impl::buildOptimizer() {
  float* alias = nullptr;
  if (!bf16 && z.offloadOptimizer.device == "none" && !pswap) {
    alias = z.stage == 3 ? part32.data() : full32.data() + partStart;
  }
  opt = std::make_unique<OptimizerPartition>(Lp, o, z.offloadOptimizer, z.subGroupSize, alias,
                                             rank);
}

ZeroEngine::ZeroEngine(std::vector<ParamInfo> params, int numBlocks, comm::ProcessGroup* group,
                       ZeroOptions zopts, OptimizerOptions oopts)
    : impl_(std::make_unique<Impl>(std::move(params), numBlocks, group, std::move(zopts),
                                   std::move(oopts))) {
  DS_LOG_INFO("zero", "ZeRO stage {} on {} rank(s), {} params ({} elements); memory per rank:\n{}",
              impl_->z.stage, impl_->world, impl_->params.size(), impl_->numel,
              memory().toString());
}

ZeroEngine::~ZeroEngine() {
  try {
    impl_->drainAll();
  } catch (const std::exception& e) {
    DS_LOG_WARN("zero", "pending collective failed at shutdown: {}", e.what());
  }
}

size_t ZeroEngine::numel() const { return impl_->numel; }
ParamTable& ZeroEngine::table() { return impl_->table; }
int64_t ZeroEngine::stepCount() const { return impl_->steps; }

void ZeroEngine::setParams(const float* full) {
  auto& m = *impl_;
  m.drainAll();
  const DType k16 = m.z.compute;
  if (m.z.stage < 3) {
    if (m.bf16) convertTo16(full, {k16, m.full16.data()}, m.numel);
    else std::memcpy(m.full32.data(), full, m.numel * sizeof(float));
  } else {
    for (size_t p = 0; p < m.params.size(); ++p) {
      m.release(p);
      Shard own = m.s3->ownRange(p, m.rank);
      const size_t lo = m.s3->localOffset(p), c = m.s3->chunk(p);
      const float* src = full + m.off[p] + own.offset;
      if (m.pswap) {
        std::vector<float> chunk(c, 0.f);
        std::memcpy(chunk.data(), src, own.size * sizeof(float));
        m.partWrite(lo, c, chunk.data());
      } else if (m.bf16) {
        std::fill(m.part16.begin() + long(lo), m.part16.begin() + long(lo + c), 0);
        convertTo16(src, {k16, m.part16.data() + lo}, own.size);
      } else {
        std::fill(m.part32.begin() + long(lo), m.part32.begin() + long(lo + c), 0.f);
        std::memcpy(m.part32.data() + lo, src, own.size * sizeof(float));
      }
    }
  }
  if (m.opt->masterOwned())
    for (const auto& r : m.ranges) m.opt->write(0, r.localOff, r.size, full + r.flatOff);
  if (m.z.stage == 3) m.gatherPersistent();
}

void ZeroEngine::Impl::gatherPersistent() {
  for (size_t p = 0; p < params.size(); ++p)
    if (persistent[p]) {
      gathering[p] = 0;
      table.value[p] = nullptr;
      table.value16[p] = nullptr;
      ensureGathered(p);
    }
  for (size_t p = 0; p < params.size(); ++p)
    if (persistent[p]) waitGathered(p);
}

void ZeroEngine::Impl::partWrite(size_t off, size_t n, const float* src) {
  if (pswap) {
    if (bf16) {  // converted in pieces: no transient copy of the whole range (n can be Lp)
      constexpr size_t kPiece = size_t(1) << 19;
      std::vector<uint16_t> h(std::min(n, kPiece));
      for (size_t d = 0; d < n; d += kPiece) {
        const size_t k = std::min(kPiece, n - d);
        convertTo16(src + d, {z.compute, h.data()}, k);
        pswap->write((off + d) * 2, k * 2, h.data());
      }
    } else {
      pswap->write(off * 4, n * 4, src);
    }
  } else if (bf16) {
    convertTo16(src, {z.compute, part16.data() + off}, n);
  } else {
    std::memcpy(part32.data() + off, src, n * sizeof(float));
  }
}

void ZeroEngine::Impl::refreshModelParams() {
  if (z.stage == 1 || z.stage == 2) {
    const size_t es = bf16 ? 2 : 4;
    const DType dt = bf16 ? z.compute : DType::kF32;
    char* full = bf16 ? reinterpret_cast<char*>(full16.data()) : reinterpret_cast<char*>(full32.data());
    if (agChunk >= Lp) {  // in place: this rank's block already sits at its offset
      waitWork(comm.allgather(full + partStart * es, full,
                              std::vector<size_t>(size_t(world), Lp), dt));
      return;
    }
    char* stage = reinterpret_cast<char*>(agStage.data());
    for (size_t c = 0; c < Lp; c += agChunk) {
      const size_t n = std::min(agChunk, Lp - c);
      waitWork(comm.allgather(full + (partStart + c) * es, stage,
                              std::vector<size_t>(size_t(world), n), dt));
      for (int r = 0; r < world; ++r)
        if (r != rank)
          std::memcpy(full + (size_t(r) * Lp + c) * es, stage + size_t(r) * n * es, n * es);
    }
  } else if (z.stage == 3) {
    for (size_t p = 0; p < params.size(); ++p) release(p);
    gatherPersistent();
  }
}

void ZeroEngine::getParams(float* full) {
  auto& m = *impl_;
  m.drainAll();
  if (m.z.stage == 0) {
    m.opt->read(0, 0, m.numel, full);
  } else if (m.z.stage < 3) {
    std::vector<float> mine(m.Lp, 0.f), all(m.flat->padded());
    m.opt->read(0, 0, m.optCount, mine.data());
    waitWork(m.comm.allgather(mine.data(), all.data(),
                              std::vector<size_t>(size_t(m.world), m.Lp), DType::kF32));
    std::memcpy(full, all.data(), m.numel * sizeof(float));
  } else {
    for (size_t p = 0; p < m.params.size(); ++p) {
      const size_t c = m.s3->chunk(p);
      std::vector<float> mine(c), all(c * size_t(m.world));
      m.opt->read(0, m.s3->localOffset(p), c, mine.data());
      waitWork(m.comm.allgather(mine.data(), all.data(), std::vector<size_t>(size_t(m.world), c),
                                DType::kF32));
      std::memcpy(full + m.off[p], all.data(), m.params[p].numel * sizeof(float));
    }
  }
}

void ZeroEngine::beginStep(bool lastMicroStep) {
  auto& m = *impl_;
  m.lastMicro = lastMicroStep;
  m.resetMicroStep();
}

StepResult ZeroEngine::step(float lr, float lossScale, float clipNorm) {
  auto& m = *impl_;
  StepResult res;
  auto t0 = std::chrono::steady_clock::now();
  m.lastMicro = true;  // whatever was announced, the reduction completes now
  if (m.z.stage < 3) {
    std::fill(m.complete.begin(), m.complete.end(), 1);
    if (m.hi > 0) m.advanceFrontier(true);
  } else {
    m.finishBackwardGrads();
  }
  m.drainAll();
  float* g = m.z.stage == 0 ? m.fullGrad.data()
           : m.z.stage == 1 ? m.fullGrad.data() + m.partStart
                            : m.gradPart.data();
  double local = 0;
  for (size_t i = 0; i < m.optCount; ++i) local += double(g[i]) * double(g[i]);
  double total = local;
  if (m.z.stage > 0) {
    auto all = m.comm.allgatherDouble(local);
    total = std::accumulate(all.begin(), all.end(), 0.0);
  }
  res.commMs = msSince(t0);
  res.gradNorm = float(std::sqrt(total) / double(m.world) / double(lossScale));
  auto zeroGrads = [&] {
    if (m.z.stage <= 1) std::fill(m.fullGrad.begin(), m.fullGrad.end(), 0.f);
    else std::fill(m.gradPart.begin(), m.gradPart.end(), 0.f);
    m.resetMicroStep();
  };
  if (!std::isfinite(total)) {
    res.skipped = true;
    zeroGrads();
    return res;
  }
  const double norm = double(res.gradNorm);
  const double clip = clipNorm > 0 ? std::max(1.0, (norm + 1e-6) / double(clipNorm)) : 1.0;
  const float gradScale = float(1.0 / (double(m.world) * double(lossScale) * clip));
  auto t1 = std::chrono::steady_clock::now();
  ++m.steps;
  Half16Out out16;
  float* copy32 = nullptr;  // model fp32 params fed from a separate master
  if (m.pswap) {
    // the updated model params go to the swap file tile by tile (afterTile below)
  } else if (m.bf16) {
    out16 = {m.z.compute, m.z.stage == 3 ? m.part16.data() : m.full16.data() + m.partStart};
  } else if (m.opt->masterOwned()) {
    copy32 = m.z.stage == 3 ? m.part32.data() : m.full32.data() + m.partStart;
  }
  auto* impl = &m;
  m.opt->update(g, m.optCount, gradScale, lr, m.steps, out16,
                [copy32, impl](size_t o, size_t n, const float* master) {
                  if (impl->pswap) impl->partWrite(o, n, master);
                  else if (copy32) std::memcpy(copy32 + o, master, n * sizeof(float));
                });
  res.optimMs = msSince(t1);
  auto t2 = std::chrono::steady_clock::now();
  m.refreshModelParams();
  res.commMs += msSince(t2);
  zeroGrads();
  return res;
}

std::vector<ZeroEngine::ShardTensor> ZeroEngine::optimizerShard() const {
  auto& m = *impl_;
  std::vector<ShardTensor> out;
  for (size_t s = 0; s < m.opt->stateNames().size(); ++s)
    for (const auto& r : m.ranges) {
      ShardTensor t{m.opt->stateNames()[s], r.flatOff, r.size, std::vector<float>(r.size)};
      m.opt->read(s, r.localOff, r.size, t.data.data());
      out.push_back(std::move(t));
    }
  return out;
}

void ZeroEngine::loadOptimizerState(
    const std::function<void(size_t, size_t, const std::string&, float*)>& readRange,
    int64_t stepCount) {
  auto& m = *impl_;
  m.drainAll();
  for (size_t s = 0; s < m.opt->stateNames().size(); ++s)
    for (const auto& r : m.ranges) {
      std::vector<float> tmp(r.size);
      readRange(r.flatOff, r.size, m.opt->stateNames()[s], tmp.data());
      m.opt->write(s, r.localOff, r.size, tmp.data());
    }
  m.steps = stepCount;
  // model params of the local partition from the master, then the stage's refresh
  for (const auto& r : m.ranges) {
    std::vector<float> tmp(r.size);
    m.opt->read(0, r.localOff, r.size, tmp.data());
    if (m.z.stage == 3) {
      m.partWrite(r.localOff, r.size, tmp.data());
    } else if (m.bf16) {
      convertTo16(tmp.data(), {m.z.compute, m.full16.data() + r.flatOff}, r.size);
    } else {
      std::memcpy(m.full32.data() + r.flatOff, tmp.data(), r.size * 4);
    }
  }
  m.refreshModelParams();
}

}  // namespace ds::zero
