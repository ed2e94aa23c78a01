// KeptScratch (runtime/tensor/kept_scratch.h): the scratch the bf16 GEMMs keep between calls is
// counted process-wide (the trainer reports it as workspace), at least the packed B operand on
// every path, and a thread's buffers stop counting when the thread exits.
#include <catch2/catch.hpp>

#include <thread>
#include <vector>

#include "core/dtype.h"
#include "runtime/tensor/bf16_gemm.h"
#include "runtime/tensor/kept_scratch.h"

using namespace ds;
using namespace ds::runtime;

TEST_CASE("kept scratch: counts what a buffer holds and releases it with the thread", "[unit]") {
  const size_t before = keptScratchBytes();
  std::thread([&] {
    thread_local KeptScratch<float> scratch;
    scratch.resized(1000);
    CHECK(keptScratchBytes() >= before + 4000);
    scratch.resized(10);  // capacity stays: still counted
    CHECK(keptScratchBytes() >= before + 4000);
    CHECK(scratch.atLeast(5) == scratch.data());
  }).join();
  CHECK(keptScratchBytes() == before);
}

TEST_CASE("kept scratch: a bf16 gemm's packed operands are counted on every path", "[unit]") {
  const int M = 8, N = 4096, K = 256;  // B (N x K) is the large operand, as the LM head's wte
  std::vector<bf16> A(size_t(M) * K, floatToBf16(0.5f)), B(size_t(N) * K, floatToBf16(0.25f));
  std::vector<float> C(size_t(M) * N);
  std::vector<Bf16GemmPath> paths{Bf16GemmPath::kWiden};
  if (bf16GemmNativeAvailable()) paths.push_back(Bf16GemmPath::kNative);
  if (bf16GemmAmxAvailable()) paths.push_back(Bf16GemmPath::kAmx);
  for (Bf16GemmPath path : paths) {
    SECTION(bf16GemmPathName(path)) {
      const size_t before = keptScratchBytes();
      std::thread([&] {
        // B stored K x N (B(n, k) at k * N + n): no path can use it in place.
        gemmBf16(M, N, K, bf16Operand(A.data(), K, 1), bf16Operand(B.data(), 1, N), C.data(), N,
                 0.0f, path);
        CHECK(keptScratchBytes() >= before + size_t(N) * K * 2);
      }).join();
      CHECK(C[0] == Approx(0.5 * 0.25 * K));
      CHECK(keptScratchBytes() == before);
    }
  }
}
