// The 3D layout of the `parallel:` plan block: the world split into data x pipeline x tensor.
// Why: tensor and pipeline parallelism (issue 17) need every rank to agree, before training,
// on which stage and shard it holds and which ranks share each axis.
// Placement (Megatron's default order tp-dp-pp, DeepSpeed's PipeModelDataParallelTopology):
// tensor is the fastest axis, so a tensor group is T consecutive ranks (inside one host when T
// divides the ranks per host), then data, then pipeline outermost:
//   rank = tensor + T * (data + D * pipeline).
// Invariants after makeParallelGrid: pipeline * tensor * data == world; every model dimension
// that is split (heads, width, 4*width, vocabulary) divides by its axis; P <= layers, and P
// divides the layers under the default uniform split (parallel.partition_method parameters and
// parallel.stage_layers spread uneven counts, pipeline_schedule.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ds::runtime {

// How pipeline stages split the layers (plan key parallel.partition_method, DeepSpeed's
// PipelineModule argument of the same name; parallel.stage_layers makes it kExplicit).
enum class PartitionMethod { kParameters, kUniform, kExplicit };

struct ParallelPlan {  // plan key parallel: {pipeline: P, tensor: T}; both default 1
  int pipeline = 1;
  int tensor = 1;
  // uniform by default (P must divide the layers, a layout that does not is refused); DeepSpeed's
  // default is parameters, which the plan can ask for.
  PartitionMethod partition = PartitionMethod::kUniform;
  std::vector<int> stageLayers;  // layers per stage with kExplicit (P entries summing to L)
  // Model chunks per pipeline stage (plan key parallel.virtual_stages; > 1: the interleaved
  // schedule, Megatron's virtual pipeline stages).
  int virtualStages = 1;
};

// "parameters" | "uniform" | "explicit" (the name the plan and the startup log use).
const char* partitionMethodName(PartitionMethod method);

struct ModelShape {  // what the split must divide; 0 = not split (e.g. an MLP model)
  int nLayer = 0, nHead = 0, nEmbd = 0, vocab = 0;
};

struct GridCoord {
  int data = 0, pipeline = 0, tensor = 0;
};

class ParallelGrid {
 public:
  ParallelGrid(int world, ParallelPlan plan);  // throws ConfigError naming world, P, T
  int world() const { return world_; }
  int pipeline() const { return p_; }
  int tensor() const { return t_; }
  int data() const { return d_; }
  GridCoord coordOf(int rank) const;
  int rankOf(GridCoord c) const;
  // The global ranks sharing `rank`'s group along one axis, in axis order (the ranks a comm
  // subgroup for that axis is made from).
  std::vector<int> tensorGroup(int rank) const;
  std::vector<int> pipelineGroup(int rank) const;
  std::vector<int> dataGroup(int rank) const;
  // Every group of one axis ("tensor" | "pipeline" | "data"), each once, in order: subgroup
  // creation is collective, so every rank creates all groups in the same order.
  std::vector<std::vector<int>> allGroups(const std::string& axis) const;
  // Refuse a model the layout cannot split, naming the numbers (before any rank trains).
  void checkModel(const ModelShape& m) const;
  // One line per rank: "rank 3: data 1 pipeline 0 tensor 1" under a header with the sizes.
  std::string describe() const;

 private:
  int world_, p_, t_, d_;
  bool evenLayers_;  // partition_method uniform: P must divide the layers
};

// What `dsrt train` runs of a layout with pipeline > 1, checked before any rank trains (the plan
// loader and the Trainer both call it): ZeRO stages 0 and 1 only (stages 2 and 3 partition the
// gradients as backward produces them, which 1F1B interleaves with other micro-batches' forwards;
// DeepSpeed's PipelineEngine refuses them too: "ZeRO-2 and ZeRO-3 are incompatible with pipeline
// parallelism"), and at least P micro-batches (gradient_accumulation_steps) per step, or 1F1B has
// no steady state. Throws ConfigError naming `where` and the numbers. No-op when pipeline == 1.
void checkPipelineTraining(const std::string& where, const ParallelPlan& plan, int zeroStage,
                           int64_t gradientAccumulationSteps);

}  // namespace ds::runtime
