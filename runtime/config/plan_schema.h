// The plan's own blocks (model, data, train): strict reads into ModelConfig, DataPlan and
// TrainPlan. The deepspeed block is ds_config_schema.h's; loading and merging is plan_loader's.
#pragma once

#include "runtime/config/plan.h"
#include "runtime/config/yaml_reader.h"

namespace ds::runtime {

// initFrom (when given) receives model.gpt.init_from as written ("" when absent).
ModelConfig readModel(NodeReader& model, std::string* initFrom = nullptr);
DataPlan readData(NodeReader& data, const ModelConfig& model);
TrainPlan readTrain(NodeReader& train);
// parallel: {pipeline, tensor}; checks the grid divides worldSize and the model divides by it.
ParallelPlan readParallel(NodeReader& parallel, const ModelConfig& model, int worldSize);

}  // namespace ds::runtime
