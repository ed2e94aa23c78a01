// RunSummary (see run_summary.h): totals and the JSON form.
#include "runtime/engine/run_summary.h"

#include <nlohmann/json.hpp>

namespace ds::runtime {

RunSummary::Totals RunSummary::totals(int warmup) const {
  Totals t;
  size_t first = steps.size() > size_t(warmup) ? size_t(warmup) : 0;
  for (size_t i = first; i < steps.size(); ++i) {
    const auto& s = steps[i];
    ++t.steps;
    t.ms += s.stepMs;
    t.fwdMs += s.fwdMs;
    t.bwdMs += s.bwdMs;
    t.commMs += s.commMs;
    t.optimMs += s.optimMs;
  }
  if (t.ms > 0) {
    t.tokensPerSec = double(tokensPerStep) * double(t.steps) / (t.ms / 1e3);
    t.gflops = t.tokensPerSec * flopsPerToken / 1e9;
  }
  return t;
}

void RunSummary::setDevice(const DeviceInfo& info) {
  device = info.summary();
  deviceMemoryBytes = info.totalBytes;
  cudaVersion = cudaVersionText(info.cudaRuntimeVersion);
  ncclVersion = ncclVersionText(info.ncclVersion);
}

std::string RunSummary::toJson() const {
  using nlohmann::json;
  json j;
  j["world_size"] = worldSize;
  j["zero_stage"] = zeroStage;
  j["dtype"] = dtype;
  j["model"] = modelKind;
  j["num_params"] = numParams;
  j["first_step"] = firstStep;
  j["tokens_per_step"] = tokensPerStep;
  if (entropyFloor >= 0) j["entropy_floor"] = entropyFloor;
  j["device"] = device;
  j["device_memory_bytes"] = deviceMemoryBytes;
  j["cuda_version"] = cudaVersion;
  j["nccl_version"] = ncclVersion;
  j["threads"] = {{"omp", threads}, {"blas", threads > 0 ? 1 : 0}, {"policy", threadPolicy}};
  json losses = json::array(), lrs = json::array(), norms = json::array(), scales = json::array();
  json skipped = json::array();
  for (const auto& s : steps) {
    losses.push_back(s.loss);
    lrs.push_back(s.lr);
    norms.push_back(s.gradNorm);
    scales.push_back(s.lossScale);
    if (s.skipped) skipped.push_back(s.step);
  }
  j["losses"] = losses;
  j["lr"] = lrs;
  j["grad_norm"] = norms;
  j["loss_scale"] = scales;
  j["skipped_steps"] = skipped;
  json ev = json::array();
  for (const auto& e : evals) ev.push_back({{"step", e.step}, {"val_loss", e.valLoss}});
  j["evals"] = ev;
  Totals t = totals();
  j["timing"] = {{"steps_timed", t.steps},
                 {"total_ms", t.ms},
                 {"fwd_ms", t.fwdMs},
                 {"bwd_ms", t.bwdMs},
                 {"comm_ms", t.commMs},
                 {"optim_ms", t.optimMs},
                 {"tokens_per_sec", t.tokensPerSec},
                 {"gflops", t.gflops}};
  j["memory"] = json::parse(memory.toJson());
  j["activation_bytes"] = activationBytes;
  j["workspace_bytes"] = workspaceBytes;
  if (!checkpointTag.empty()) j["checkpoint"] = checkpointTag;
  if (nvmeBytesRead || nvmeBytesWritten)
    j["nvme"] = {{"bytes_read", nvmeBytesRead}, {"bytes_written", nvmeBytesWritten}};
  if (compressedBytes || plainAllreduceBytesPerStep)
    j["compressed_allreduce"] = {{"bytes_sent", compressedBytes},
                                 {"plain_allreduce_bytes_per_step", plainAllreduceBytesPerStep}};
  return j.dump(2);
}

}  // namespace ds::runtime
