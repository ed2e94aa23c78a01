// The sizes the stages derive from DeepSpeed's bucket and tile keys: reduce buckets clamped to an
// eighth of the partition (never below 1 Mi elements, never above the flat space), NVMe tiles
// clamped to 2 Mi elements; and the predicted transient bounds on a toy block structure.
#include <catch2/catch.hpp>

#include "tests/zero/toy_model.h"
#include "zero/optimizer_partition.h"
#include "zero/param_index.h"
#include "zero/transient_bounds.h"
#include "zero/zero_options.h"

using namespace ds::zero;

TEST_CASE("bucket sizing: reduce_bucket_size is clamped to the partition, not the model",
          "[unit]") {
  // GPT-2 124M at 2 ranks, DeepSpeed's default 5e8: an eighth of the 62M-element partition.
  CHECK(effectiveReduceBucket(500000000, 62000000, 124000000) == 7750000);
  CHECK(effectiveReduceBucket(500000000, 1000, 2000) == 2000);  // small model: whole space
  CHECK(effectiveReduceBucket(500000000, 4000000, 8000000) == (size_t(1) << 20));  // floor
  CHECK(effectiveReduceBucket(64, 62000000, 124000000) == 64);  // a smaller setting stays
}

TEST_CASE("bucket sizing: nvme tiles follow sub_group_size up to what the I/O needs", "[unit]") {
  CHECK(nvmeTileElems(1000000000, 62000000) == (size_t(2) << 20));  // default 1e9: 8 MiB tiles
  CHECK(nvmeTileElems(3000, 10250) == 3072);                        // rounded up to 4 KiB
  CHECK(nvmeTileElems(1000000000, 5000) == 5120);                   // the partition
}

TEST_CASE("transient bounds: held gradients and gathered blocks of a toy model", "[unit]") {
  const ds::test::ToyModel m(4, 10);  // E 10 (blocks 0 and 3), W_b 100, c_b 10
  const ParamIndex index(m.params, m.L);
  const ParamElems numel = [&](size_t p) { return index.param(p).numel; };
  // Backward from block 3: W3 + c3 + E held, then E stays while each block's W + c come and go.
  CHECK(transientGradBound(index, numel, 0) == 120);
  CHECK(transientGradBound(index, numel, 64) == 184);
  // Block 0 (E + W0 + c0 = 120) plus its neighbour's 110, or less when the prefetch is smaller.
  CHECK(gatherBound(
            index, numel, [](size_t) { return false; }, 1000) == 230);
  CHECK(gatherBound(
            index, numel, [](size_t) { return false; }, 50) == 170);
  CHECK(gatherBound(
            index, numel, [&](size_t p) { return index.param(p).numel <= 10; }, 1000) == 200);
}
