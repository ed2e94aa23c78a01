// OpenBLAS's kernel choice. Debian's OpenBLAS 0.3.21 (DYNAMIC_ARCH) picks its kernels from the CPU
// model at load time and falls back to "Prescott" (SSE3) for models newer than it knows: on an
// Emerald Rapids Xeon (family 6, model 207) sgemm ran 5-13 GFLOP/s instead of 19-175 with
// SkylakeX's. OPENBLAS_CORETYPE overrides the choice but is read only when the library loads, so
// dsrt re-executes itself once with it set (before anything else runs) when the CPU supports a
// better kernel than the one picked. A user's OPENBLAS_CORETYPE is always kept.
#pragma once

#include <optional>
#include <string>

namespace ds::runtime {

// The kernel to ask for instead of `current`, or nullopt when current is fine: a pre-AVX2 core
// on a CPU with AVX-512 (F, BW, DQ, VL) gets "SkylakeX", on one with AVX2 + FMA "Haswell". Pure.
std::optional<std::string> betterBlasCore(const std::string& current, bool avx512, bool avx2Fma);

// Called first thing in main: re-executes /proc/self/exe with OPENBLAS_CORETYPE set (and
// DS_BLAS_CORE_FROM naming the fallback it replaced) when betterBlasCore says so, the variable is
// unset and this is not already the re-executed process. Returns only when it did not re-execute.
void reexecForBlasCore(char** argv);

}  // namespace ds::runtime
