// OpenBLAS kernel choice (see blas_core.h).
#include "runtime/tensor/blas_core.h"

#include "runtime/tensor/tensor_knobs.h"

#include <unistd.h>

#include <cstdlib>

#include "runtime/tensor/threads.h"

namespace ds::runtime {

std::optional<std::string> betterBlasCore(const std::string& current, bool avx512, bool avx2Fma) {
  static const char* const kOld[] = {"Prescott",  "Core2",  "Penryn",  "Dunnington",
                                     "Nehalem",   "Atom",   "Katmai",  "Coppermine",
                                     "Northwood", "Banias", "unknown", "Sandybridge"};
  bool old = false;
  for (const char* o : kOld) old = old || current == o;
  if (!old) return std::nullopt;
  if (avx512) return std::string("SkylakeX");
  if (avx2Fma && current != "Haswell") return std::string("Haswell");
  return std::nullopt;
}

void reexecForBlasCore(char** argv) {
  if (knobIsSet(knobs::kOpenblasCoretype) || knobIsSet(knobs::kBlasCoreFrom)) return;
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const std::string cur = blasCoreName();
  auto want = betterBlasCore(cur, avx512, avx2);
  if (!want) return;
  ::setenv("OPENBLAS_CORETYPE", want->c_str(), 1);
  ::setenv("DS_BLAS_CORE_FROM", cur.c_str(), 1);
  ::execv("/proc/self/exe", argv);
  // exec failed: carry on with the kernels we have, and say so through the variables' absence.
  ::unsetenv("OPENBLAS_CORETYPE");
}

}  // namespace ds::runtime
