// One axis's subgroup of the job's group (see axis_group.h).
#include "runtime/engine/axis_group.h"

namespace ds::runtime {

std::unique_ptr<comm::ProcessGroup> axisGroup(comm::ProcessGroup* world,
                                              const std::vector<std::vector<int>>& groups) {
  std::unique_ptr<comm::ProcessGroup> mine;
  for (const auto& ranks : groups) {
    if (ranks.size() <= 1) continue;
    auto group = world->newSubgroup(ranks);
    if (group) mine = std::move(group);
  }
  return mine;
}

}  // namespace ds::runtime
