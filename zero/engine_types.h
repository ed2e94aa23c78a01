// What a training engine reports: a step's outcome (StepResult) and the bytes it holds per kind
// and place (MemoryReport). Shared by the host ZeroEngine and the device engine; not either one.
#pragma once

#include <cstddef>
#include <string>

namespace ds::zero {

struct StepResult {
  bool skipped = false;  // inf/nan in gradients: no update happened
  float gradNorm = 0;    // global L2 norm of the averaged, unscaled gradients (before clipping)
  double commMs = 0;     // time waiting for / issuing collectives inside step()
  double optimMs = 0;    // optimizer update (incl. nvme I/O)
};

enum class MemKind { kParams = 0, kGrads = 1, kOptimizerStates = 2, kBuffers = 3 };
enum class MemPlace { kDevice = 0, kHost = 1, kNvme = 2 };

// Bytes held by this rank per kind x place (peak-style: what is allocated now, plus the transient
// buffers' capacity). On a CPU-only machine "device" is host memory not offloaded.
struct MemoryReport {
  size_t bytes[4][3] = {};
  size_t at(MemKind kind, MemPlace place) const { return bytes[int(kind)][int(place)]; }
  size_t total() const;
  std::string toString() const;  // a small table, one line per kind
  std::string toJson() const;    // {"params":{"device":..,"host":..,"nvme":..},...}
};

}  // namespace ds::zero
