// What rank 0 tells a person at the start and the end of a run (issue 16 item 6): the startup
// memory table (the largest figure over the ranks for each kind and place; every rank logs its own
// at debug level) and where the checkpoints, monitors and summary went. Formatting only; the
// trainer gathers the numbers (a max-allreduce) and prints.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "zero/zero_engine.h"

namespace ds::comm {
class ProcessGroup;
}

namespace ds::runtime {

// Each cell's largest value over the group's ranks, and the largest rank total (a max-allreduce
// of float copies: exact to 2^-24 relative, far finer than the table's 0.01 MiB). Collective;
// group nullptr or of one rank: `mine` itself.
zero::MemoryReport largestOverRanks(comm::ProcessGroup* group, const zero::MemoryReport& mine,
                                    size_t* largestTotal);

// "memory per rank at start (largest over N ranks; ...):" then one line per kind with device /
// host / nvme MiB and a last line with the largest rank total. `maxima` holds the per-cell maxima.
// `device` heads the first column: the training device ("cpu", "cuda:0"), so that a CPU run's
// table says its device memory is the host's (the host column is then what offload moved there).
std::string formatMemoryTable(const zero::MemoryReport& maxima, size_t largestTotal, int world,
                              const std::string& device);

// The end-of-run lines: "checkpoints: ...", "monitors: ...", "summary: ..." (each says "none" and
// which setting would produce it when nothing was written). Paths are made absolute.
std::vector<std::string> formatOutputLines(const std::string& checkpointDir,
                                           const std::string& checkpointTag,
                                           const std::vector<std::string>& monitors,
                                           const std::string& summaryPath);

}  // namespace ds::runtime
