// The comm benchmark proper, separate from its command line so tests can run it on any
// ProcessGroup: for each collective and size, warm up, time `iters` issue+wait rounds (the
// slowest rank's time counts), then check one result against values computed here.
// busbw follows nccl-tests: allreduce x 2(n-1)/n, reduce_scatter / allgather x (n-1)/n (size =
// the full buffer), broadcast x 1.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "comm/process_group.h"

namespace ds::runtime {

struct CommBenchOptions {
  std::vector<std::string> ops{"allreduce", "reduce_scatter", "allgather", "broadcast"};
  std::vector<size_t> sizes;  // bytes of the full buffer (rounded down to whole elements)
  int warmup = 2;
  double targetSeconds = 0.5;  // per row: iterations = clamp(target / first run, 3, 5000)
  bool check = true;
  bool sharedHostBuffers = true;  // host buffers in shared memory (comm/shared_host_buffer.h)
};

struct CommBenchRow {
  std::string op;
  size_t bytes = 0, count = 0;
  int iters = 0;
  double seconds = 0;           // mean per iteration, slowest rank
  double algbw = 0, busbw = 0;  // GB/s (1e9 bytes)
  bool checked = false, correct = true;
};

// Sizes from lo to hi (bytes) multiplying by factor; hi is always included.
std::vector<size_t> sizeSweep(size_t lo, size_t hi, double factor);

// Collective over pg; every rank returns the same rows.
std::vector<CommBenchRow> runCommBench(comm::ProcessGroup& pg, const CommBenchOptions& opts);

// nccl-tests style table (rank 0 prints it).
std::string formatCommBench(const std::vector<CommBenchRow>& rows, const std::string& backend,
                            int worldSize);

}  // namespace ds::runtime
