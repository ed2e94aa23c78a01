// betterBlasCore (runtime/tensor/blas_core.h): OpenBLAS's pre-AVX2 fallbacks are replaced by the
// best kernel the CPU supports; a modern choice is kept.
#include <catch2/catch.hpp>

#include "runtime/tensor/blas_core.h"

using ds::runtime::betterBlasCore;

TEST_CASE("blas core: Prescott fallback on an AVX-512 CPU becomes SkylakeX", "[unit]") {
  CHECK(betterBlasCore("Prescott", true, true) == "SkylakeX");
  CHECK(betterBlasCore("Nehalem", false, true) == "Haswell");
  CHECK(betterBlasCore("Sandybridge", true, true) == "SkylakeX");
  CHECK_FALSE(betterBlasCore("Prescott", false, false).has_value());  // nothing better to ask for
  CHECK_FALSE(betterBlasCore("SkylakeX", true, true).has_value());
  CHECK_FALSE(betterBlasCore("Haswell", false, true).has_value());
  CHECK_FALSE(betterBlasCore("Zen", true, true).has_value());
  CHECK_FALSE(betterBlasCore("Cooperlake", true, true).has_value());
}
