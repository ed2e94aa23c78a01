// Memory fit before the first step; see memory_fit.h.
#include "runtime/engine/memory_fit.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "comm/process_group.h"
#include "core/error.h"
#include "core/log.h"
#include "runtime/device/host_memory.h"
#include "runtime/engine/run_report.h"

namespace ds::runtime {
namespace {

double mib(size_t bytes) { return double(bytes) / 1048576.0; }

// Host + device columns: what lives in this process's memory on a CPU-only rank.
size_t inMemory(const zero::MemoryReport& table) {
  size_t sum = 0;
  for (const auto& kind : table.bytes) sum += kind[0] + kind[1];
  return sum;
}

struct Setting {
  int stage;
  const char* optimizer;  // offload_optimizer.device
  const char* param;      // offload_param.device
};

// The ZeRO formula for a setting's model states in memory (reference/zero.md §8): params e*Psi
// (stage 3: /N), fp32 grads 4*Psi (stage 2+: /N), optimizer K*Psi (stage 1+: /N; K = 8 when the
// fp32 master is the model's own fp32 params, else 12); what is on nvme counts 0.
struct FormulaBytes {
  size_t params = 0, grads = 0, optimizer = 0;
};

FormulaBytes formulaParts(const Setting& s, size_t psi, int world, DType compute) {
  const size_t n = size_t(std::max(world, 1));
  const bool fp32 = compute == DType::kF32;
  const std::string opt = s.optimizer, param = s.param;
  const size_t elem = fp32 ? 4 : 2;
  FormulaBytes out;
  out.params = param == "nvme" ? 0 : (s.stage == 3 ? elem * psi / n : elem * psi);
  out.grads = s.stage >= 2 ? 4 * psi / n : 4 * psi;
  const size_t k = fp32 && opt != "nvme" && param != "nvme" ? 8 : 12;
  out.optimizer = opt == "nvme" ? 0 : (s.stage >= 1 ? k * psi / n : k * psi);
  return out;
}

size_t formulaStates(const Setting& s, size_t psi, int world, DType compute) {
  const FormulaBytes parts = formulaParts(s, psi, world, compute);
  return parts.params + parts.grads + parts.optimizer;
}

std::string settingName(const Setting& s) {
  std::string text = fmt::format("zero_optimization.stage {}", s.stage);
  if (std::string(s.optimizer) != "none")
    text += fmt::format(" + offload_optimizer.device {}", s.optimizer);
  if (std::string(s.param) != "none") text += fmt::format(" + offload_param.device {}", s.param);
  return text;
}

// The first settings (least offload first) whose formula + buffers + activations fit `budget`.
std::string suggestions(const MemoryFitInput& in, size_t budget) {
  static const Setting kSettings[] = {
      {1, "none", "none"}, {2, "none", "none"}, {3, "none", "none"}, {1, "nvme", "none"},
      {2, "nvme", "none"}, {3, "nvme", "none"}, {3, "nvme", "nvme"},
  };
  const size_t buffers = in.table.bytes[3][0] + in.table.bytes[3][1];
  std::vector<std::string> fits;
  for (const Setting& s : kSettings) {
    if (s.stage < in.zero.stage || s.stage > in.maxStage) continue;
    const size_t need =
        formulaStates(s, in.numParams, in.partitionWorld > 0 ? in.partitionWorld : in.world,
                      in.zero.compute) +
        buffers + in.activationBytes;
    if (need <= budget)
      fits.push_back(fmt::format("{} (about {:.0f} MiB)", settingName(s), mib(need)));
    if (fits.size() == 2) break;
  }
  std::string text;
  if (!fits.empty()) {
    text = "settings that would fit: ";
    for (size_t i = 0; i < fits.size(); ++i) text += (i ? "; or " : "") + fits[i];
  } else {
    text = "no ZeRO/offload setting fits at this world size";
  }
  if (in.maxStage < 3)
    text += fmt::format(
        " (pipeline and tensor parallelism run ZeRO stages 0-{} only; more pipeline stages or "
        "tensor ranks split the model further)",
        in.maxStage);
  if (in.activationBytes > budget / 4)
    text += fmt::format(
        "; activations alone are {:.0f} MiB: lower train_micro_batch_size_per_gpu or model "
        "seq_len, or turn on activation_checkpointing",
        mib(in.activationBytes));
  return text + "; or more ranks";
}

// This rank's share of the machine: the smallest free memory (hostMemory) / localSize over the
// ranks and the largest resident set, so that every rank takes the same decision. MiB as floats
// (the dtype every backend reduces). Collective when the group has more than one rank. localSize 0:
// the states live on a device (not checked against the host's memory here).
void readMachineShare(comm::ProcessGroup* group, int localSize, MemoryFitInput* in) {
  if (localSize <= 0) return;  // the same on every rank: no rank enters the allreduce
  const HostMemory host = hostMemory();
  float cells[2] = {float(double(host.availableBytes) / double(localSize) / 1048576.0),
                    -float(double(residentBytes()) / 1048576.0)};
  if (group && group->size() > 1)
    group->allreduce(comm::view(cells, 2), comm::ReduceOp::kMin)->wait();
  in->availableBytes = size_t(double(std::max(cells[0], 0.f)) * 1048576.0);
  in->localSize = localSize;
  in->availableSource = host.source;
  in->residentBytes = size_t(double(std::max(-cells[1], 0.f)) * 1048576.0);
}

// ZeRO 2 and 3 partition gradients during backward, which pipeline (1F1B) and tensor parallel
// runs refuse (config/parallel_grid.cc, engine/tensor_run.cc).
int maxStageOf(const Plan& plan) {
  return plan.parallel.pipeline > 1 || plan.parallel.tensor > 1 ? 1 : 3;
}

// What every check takes from the plan: the activation estimate at the compute dtype, the plan's
// limit, the ZeRO settings and the highest stage the layout runs (the host's share: not yet).
MemoryFitInput planInput(const Plan& plan) {
  MemoryFitInput in;
  ModelConfig cfg = plan.model;
  cfg.compute = plan.deepspeed.bf16 ? DType::kBF16 : DType::kF32;
  cfg.activationCheckpointing = plan.deepspeed.activationCheckpointing;
  in.activationBytes = estimateActivationBytes(cfg, int(plan.deepspeed.microBatchPerGpu));
  in.limitBytes = size_t(std::max<int64_t>(plan.train.memoryLimitMb, 0)) * 1048576;
  in.zero = plan.deepspeed.zero;
  in.zero.compute = cfg.compute;
  in.maxStage = maxStageOf(plan);
  return in;
}

// planInput with the ZeRO formula's model states for numParams over `world` ranks as its table.
MemoryFitInput formulaInput(const Plan& plan, size_t numParams, int world) {
  MemoryFitInput in = planInput(plan);
  in.numParams = numParams;
  in.world = std::max(world, 1);
  const std::string optimizer = in.zero.offloadOptimizer.device,
                    param = in.zero.offloadParam.device;
  const FormulaBytes parts = formulaParts({in.zero.stage, optimizer.c_str(), param.c_str()},
                                          numParams, in.world, in.zero.compute);
  const auto place = [](const std::string& device) {
    return int(device == "nvme"  ? zero::MemPlace::kNvme
               : device == "cpu" ? zero::MemPlace::kHost
                                 : zero::MemPlace::kDevice);
  };
  in.table.bytes[int(zero::MemKind::kParams)][place(param)] = parts.params;
  in.table.bytes[int(zero::MemKind::kGrads)][place(optimizer)] = parts.grads;
  in.table.bytes[int(zero::MemKind::kOptimizerStates)][place(optimizer)] = parts.optimizer;
  in.basis = "the ZeRO formula's model states, checked before allocating them";
  return in;
}

}  // namespace

size_t estimateActivationBytes(const ModelConfig& cfg, int microBatch) {
  const size_t act = cfg.compute == DType::kF32 ? 4 : 2;
  const size_t tokens = size_t(std::max(microBatch, 1)) * size_t(std::max(cfg.seqLen, 1));
  if (cfg.kind == "mlp") {
    size_t widths = 0;
    for (int width : cfg.sizes) widths += size_t(width);
    return tokens * widths * 4 * 2;  // pre-activations and their gradients
  }
  const size_t L = size_t(cfg.nLayer), C = size_t(cfg.nEmbd), H = size_t(cfg.nHead);
  const size_t T = size_t(cfg.seqLen);
  const size_t V = size_t(cfg.paddedVocab > 0 ? cfg.paddedVocab : cfg.vocabSize);
  // Per layer and token: ln1, qkv (3C), atty, res2, ln2, fch and its GELU (4C each) = 15C, the
  // attention probabilities (H*T), the LayerNorm means/rstds (4 floats).
  const size_t perLayer = cfg.activationCheckpointing ? 0 : (15 * C + H * T) * act + 4 * 4;
  const size_t resid = (L + 2) * C * act;    // block inputs (always held) and the final LN
  const size_t head = V * 4 * 2;             // logits/probabilities and their gradient
  const size_t work = (16 * C + H * T) * 4;  // one layer's backward workspace
  return tokens * (L * perLayer + resid + head + work + 2 * sizeof(int32_t));
}

void checkMemoryFit(const MemoryFitInput& in) {
  const size_t need = inMemory(in.table) + in.activationBytes;
  size_t budget = 0;
  std::string what;
  if (in.limitBytes > 0) {
    budget = in.limitBytes;
    what = fmt::format("train.memory_limit_mb ({:.0f} MiB per rank)", mib(in.limitBytes));
  }
  if (in.availableBytes > 0) {
    const size_t machine = in.availableBytes + in.residentBytes;
    if (budget == 0 || machine < budget) {
      budget = machine;
      what = fmt::format(
          "this host's share of free memory ({:.0f} MiB per rank: {:.0f} MiB free by {} over {} "
          "local rank(s) + {:.0f} MiB already held)",
          mib(machine), mib(in.availableBytes * size_t(std::max(in.localSize, 1))),
          in.availableSource, in.localSize, mib(in.residentBytes));
    }
  }
  DS_LOG_DEBUG("memory", "fit: need {:.0f} MiB ({}), budget {:.0f} MiB ({})", mib(need),
               in.basis.empty() ? "the table" : in.basis, mib(budget),
               what.empty() ? "none" : what);
  if (budget == 0 || need <= budget) return;
  throw ConfigError(fmt::format(
      "memory: the plan needs {:.0f} MiB per rank (model states + buffers {:.0f} MiB, "
      "activations about {:.0f} MiB{}) but {} allows {:.0f} MiB: {} bytes ({:.0f} MiB) missing at "
      "ZeRO stage {}, offload_optimizer {}, offload_param {}, {} rank(s), {} params;\n{}\n{}",
      mib(need), mib(inMemory(in.table)), mib(in.activationBytes),
      in.basis.empty() ? "" : "; " + in.basis, what, mib(budget), need - budget, mib(need - budget),
      in.zero.stage, in.zero.offloadOptimizer.device, in.zero.offloadParam.device, in.world,
      in.numParams, formatMemoryTable(in.table, in.table.total(), in.world, "cpu"),
      suggestions(in, budget)));
}

void checkFormulaFit(comm::ProcessGroup* group, const Plan& plan, size_t numParams, int world,
                     int localSize) {
  // Every rank reads the host's free memory before the allreduce and none allocates its states
  // before all have contributed, so no rank's share is read after another rank's states were
  // allocated.
  MemoryFitInput in = formulaInput(plan, numParams, world);
  readMachineShare(group, localSize, &in);
  checkMemoryFit(in);
}

std::string checkPlanMemory(const Plan& plan, size_t numParams, int world, bool hostRun) {
  const MemoryFitInput in = formulaInput(plan, numParams, world);
  if (hostRun) checkMemoryFit(in);  // availableBytes 0: the plan's limit only
  const auto cell = [&](zero::MemKind kind) {
    size_t sum = 0;
    for (size_t bytes : in.table.bytes[int(kind)]) sum += bytes;
    return mib(sum);
  };
  return fmt::format(
      "memory per rank (ZeRO formula, {} params at stage {} over {} rank(s), before buffers): "
      "params {:.0f} MiB, grads {:.0f}, optimizer states {:.0f}, activations about {:.0f}; "
      "{:.0f} MiB in memory; train.memory_limit_mb {}",
      numParams, in.zero.stage, in.world, cell(zero::MemKind::kParams), cell(zero::MemKind::kGrads),
      cell(zero::MemKind::kOptimizerStates), mib(in.activationBytes),
      mib(inMemory(in.table) + in.activationBytes),
      !in.limitBytes ? "not set"
      : hostRun      ? fmt::format("{} (fits)", plan.train.memoryLimitMb)
                     : fmt::format("{} (not checked: a device run's states are on the device)",
                                   plan.train.memoryLimitMb));
}

void checkHostMemoryFit(comm::ProcessGroup* group, const Plan& plan, const zero::MemoryReport& mine,
                        size_t numParams, int localSize, int partitionWorld) {
  size_t largest = 0;
  const zero::MemoryReport table = largestOverRanks(group, mine, &largest);
  // largestOverRanks is collective: every rank has allocated its states before any reads.
  MemoryFitInput in = planInput(plan);
  readMachineShare(group, localSize, &in);
  in.table = table;
  in.numParams = numParams;
  in.world = group ? group->size() : 1;
  in.partitionWorld = partitionWorld;
  checkMemoryFit(in);
}

}  // namespace ds::runtime
