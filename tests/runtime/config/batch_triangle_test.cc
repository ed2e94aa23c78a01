// DeepSpeed's batch triangle: every resolution case and the exact assertion messages.
#include <catch2/catch.hpp>

#include "core/error.h"
#include "runtime/config/batch_triangle.h"

using namespace ds::runtime;

namespace {
std::string errorOf(BatchTriangle b, int w) {
  try {
    resolveBatchTriangle(b, w);
  } catch (const ds::ConfigError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("batch triangle: resolution cases", "[unit]") {
  auto r = resolveBatchTriangle({32, 4, 0}, 2);  // train + micro
  CHECK(r.gas == 4);
  r = resolveBatchTriangle({32, 0, 2}, 4);  // train + gas
  CHECK(r.micro == 4);
  r = resolveBatchTriangle({0, 3, 5}, 2);  // micro + gas
  CHECK(r.train == 30);
  r = resolveBatchTriangle({32, 0, 0}, 4);  // train only
  CHECK((r.micro == 8 && r.gas == 1));
  r = resolveBatchTriangle({0, 6, 0}, 3);  // micro only
  CHECK((r.train == 18 && r.gas == 1));
  r = resolveBatchTriangle({24, 3, 4}, 2);  // all three, consistent
  CHECK(r.train == 24);
}

TEST_CASE("batch triangle: DeepSpeed's messages", "[unit]") {
  CHECK(errorOf({}, 1) ==
        "Either train_batch_size or train_micro_batch_size_per_gpu needs to be provided");
  CHECK(errorOf({32, 4, 3}, 2) ==
        "Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu * "
        "gradient_acc_step * world_size 32 != 4 * 3 * 2");
  // Integer division leaves an inconsistent triple that the final assertion catches.
  CHECK(errorOf({32, 0, 0}, 3) ==
        "Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu * "
        "gradient_acc_step * world_size 32 != 10 * 1 * 3");
  // The plan schema already refuses train_batch_size < 1, so this check is only reachable through
  // the resolver itself (as in DeepSpeed, which asserts after filling in the triangle).
  CHECK(errorOf({-4, 0, 0}, 1) == "Train batch size: -4 has to be greater than 0");
  CHECK(errorOf({0, -2, 3}, 2) == "Train batch size: -12 has to be greater than 0");
  CHECK(errorOf({4, 0, 0}, 8) == "Micro batch size per gpu: 0 has to be greater than 0");
  CHECK(errorOf({32, 16, 0}, 4) == "Gradient accumulation steps: 0 has to be greater than 0");
}
