// Memory fit: the check, made before the first step, that a rank's model states, buffers and
// activations fit in the host memory the plan allows (train.memory_limit_mb) and the machine has
// (MemAvailable, or a memory cgroup's limit where tighter: host_memory.h; shared by the ranks on
// this host). Not the accounting (zero::MemoryReport, the
// stages own it) and not device memory (a run with a device checks its own allocations).
// Invariant: a refusal names the bytes missing, prints the table, and names the ZeRO/offload
// settings whose formula would fit (or says that none does).
#pragma once

#include <cstddef>
#include <string>

#include "runtime/config/plan.h"
#include "runtime/model/model.h"
#include "zero/engine_types.h"
#include "zero/zero_options.h"

namespace ds::comm {
class ProcessGroup;
}

namespace ds::runtime {

// Bytes of activations (and backward workspace) a model of cfg holds for one micro-batch of B
// sequences of cfg.seqLen tokens: the fields Gpt2Model / MlpModel keep, at the compute dtype's
// storage size, logits always fp32. An estimate made before any forward (Model::activationBytes
// is 0 until then); within a few percent of what the model reports after its first step.
size_t estimateActivationBytes(const ModelConfig& cfg, int microBatch);

struct MemoryFitInput {
  zero::MemoryReport table;  // this rank's memory table (the largest over ranks)
  size_t activationBytes = 0;
  size_t limitBytes = 0;      // train.memory_limit_mb in bytes; 0 = no plan limit
  size_t availableBytes = 0;  // memory this rank may still allocate; 0 = unknown (not checked)
  int localSize = 1;          // the ranks on this host that availableBytes is a share among
  std::string availableSource = "MemAvailable";  // where availableBytes comes from (host_memory.h)
  size_t residentBytes = 0;  // what the rank already holds (part of the table already)
  size_t numParams = 0;      // Psi
  // The ranks the ZeRO formula partitions over (pipeline / tensor: the data group; 0 = world)
  // and, with it, numParams is this rank's engine's parameters.
  int partitionWorld = 0;
  int world = 1;
  zero::ZeroOptions zero;  // stage, offload devices, compute dtype
  // The highest ZeRO stage the layout runs (pipeline or tensor parallelism: 1), so that the
  // suggested settings are ones the plan can take.
  int maxStage = 3;
  std::string basis;  // how the table was made, when not measured (said in the message)
};

// Throws ConfigError when table (host + device columns) + activations exceed limitBytes, or when
// what is still to be allocated exceeds availableBytes.
void checkMemoryFit(const MemoryFitInput& in);

// The trainer's first check, before the engine allocates anything: the ZeRO formula's model
// states for numParams at the plan's stage and offload over `world` ranks (no buffers yet) plus
// the activation estimate, against train.memory_limit_mb and this host's free-memory share
// (the smallest hostMemory() / localSize over the group, plus what the rank already holds). So a
// plan over either is refused on every rank before any of them allocates its states (which, at
// several ranks per host, could otherwise exhaust the machine and end in the kernel's OOM killer
// before the table's check runs). Collective over group (every rank calls it; every rank refuses
// or none does); localSize 0 (states on a device) checks only the plan's limit. checkHostMemoryFit
// then checks the real table.
void checkFormulaFit(comm::ProcessGroup* group, const Plan& plan, size_t numParams, int world,
                     int localSize);

// dsrt check's: the ZeRO formula's model states for numParams at the plan's stage and offload
// over `world` data-parallel ranks plus the activation estimate, against train.memory_limit_mb
// only (the machine that checks need not be the one that trains), and only for a host run (the
// limit is host memory; hostRun false: a device holds the states). Throws the trainer's
// ConfigError when over; returns the estimate as one line.
std::string checkPlanMemory(const Plan& plan, size_t numParams, int world, bool hostRun);

// The trainer's check on a host (CPU) run: the largest table over the group, the plan's limit,
// the activation estimate for the micro-batch, the smallest hostMemory() / localSize over the
// ranks. Collective (every rank calls it; every rank refuses or none does). numParams and
// partitionWorld feed the suggested settings' formula: with pipeline or tensor parallelism they are
// this rank's engine's parameters (a stage's tensor shards) and its data group's size
// (partitionWorld 0: the group's size).
void checkHostMemoryFit(comm::ProcessGroup* group, const Plan& plan, const zero::MemoryReport& mine,
                        size_t numParams, int localSize, int partitionWorld = 0);

}  // namespace ds::runtime
