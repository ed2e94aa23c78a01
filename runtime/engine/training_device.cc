// openTrainingDevice (see training_device.h): the plan's request, the rank's site, the ops.
#include "runtime/engine/training_device.h"

#include <fmt/format.h>
#include <unistd.h>

#include "core/error.h"
#include "runtime/device/rank_device.h"

namespace ds::runtime {
namespace {

std::string hostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "localhost";
  return buf;
}

}  // namespace

TrainingDevice openTrainingDevice(const Plan& plan, int rank, int localRank, int localSize) {
  DeviceRequest req;
  req.mode = plan.train.device;
  req.allowSharing = plan.train.deviceSharing;
  req.allowTf32 = plan.train.tf32;
  DeviceSite site;
  site.rank = rank;
  site.localRank = localRank;
  site.localSize = localSize;
  site.host = hostName();
  RankDevice got = openRankDevice(req, site);
  TrainingDevice out;
  out.info = got.info;
  out.why = got.choice.why;
  if (!got.choice.cuda) return out;
  if (plan.deepspeed.optimizer.compressed())
    throw ConfigError(fmt::format(
        "{}: optimizer.type {} on {} ({}): 1-bit Adam / 0/1 Adam run on the CPU path only (the "
        "compressed allreduce works on host buffers); use another optimizer.type or train.device: "
        "cpu",
        plan.source, plan.deepspeed.optimizer.type, got.choice.name(), siteText(site)));
  const auto& zero = plan.deepspeed.zero;
  if (zero.quantizedWeights || zero.quantizedGradients || zero.hpzPartitionSize > 1 ||
      zero.micsShardSize > 0)
    throw ConfigError(fmt::format(
        "{}: zero_optimization.{} on {} ({}): ZeRO++ runs on the CPU path only (its device "
        "stage 3 gathers exactly, over the whole world); unset it or use train.device: cpu",
        plan.source,
        zero.quantizedWeights     ? "zero_quantized_weights"
        : zero.quantizedGradients ? "zero_quantized_gradients"
        : zero.micsShardSize > 0  ? "mics_shard_size"
                                  : "zero_hpz_partition_size",
        got.choice.name(), siteText(site)));
  out.ops = makeCudaOps(got.choice.index, plan.train.tf32);
  return out;
}

}  // namespace ds::runtime
