// Fault injection for the fault tests (DS_FAULT_KILL, docs/knobs.md): one rank of `dsrt train`
// SIGKILLs itself at a chosen step, or inside a chosen checkpoint save, on a chosen restart
// attempt. A real SIGKILL (nothing is cleaned up, as with an outside kill -9), at a point a test
// can name exactly. Not a general chaos tool: one kill per process, and nothing when unset.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace ds::runtime {

enum class FaultPoint { kStep, kSave };

struct FaultKill {
  int rank = 0;
  int64_t step = 1;  // kStep: before step `step` runs; kSave: in the save after step `step`
  FaultPoint at = FaultPoint::kStep;
  int attempt = 0;  // DS_RESTART_ATTEMPT it fires on; -1: every attempt
};

// Parses DS_FAULT_KILL's text ("rank=1,step=7,at=save,attempt=any"); ConfigError naming the
// variable, the part and what was expected.
FaultKill parseFaultKill(const std::string& text);

// DS_FAULT_KILL when set and meant for this rank and attempt (DS_RESTART_ATTEMPT), else nullopt.
std::optional<FaultKill> faultKillFromEnv(int rank);

// Kills this process with SIGKILL when `f` names this point, rank and step; says so on stderr
// first (with the wall-clock time, for the fault record).
void maybeFaultKill(const std::optional<FaultKill>& f, FaultPoint at, int rank, int64_t step);

}  // namespace ds::runtime
