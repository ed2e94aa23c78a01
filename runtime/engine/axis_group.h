// axisGroup: this rank's comm subgroup along one axis of the parallel grid (pipeline, data or
// tensor: ParallelGrid::allGroups), shared by the pipeline and tensor runs.
// Invariants: every rank calls it with the same list of groups in the same order (subgroup
// creation is collective over `world`); the result is null when this rank's group has 1 rank.
#pragma once

#include <memory>
#include <vector>

#include "comm/process_group.h"

namespace ds::runtime {

std::unique_ptr<comm::ProcessGroup> axisGroup(comm::ProcessGroup* world,
                                              const std::vector<std::vector<int>>& groups);

}  // namespace ds::runtime
