// Device buffers on gloo (comm/device_staging.h): ProcessGroup stages them through pinned host
// memory. [gpu]: 2 thread ranks sharing one GPU, every staged collective on cudaMalloc'd buffers
// against host-computed sums. [unit]: a build without CUDA refuses a device view by name.
#include <catch2/catch.hpp>

#include <vector>

#include "comm/process_group.h"
#include "comm/registry.h"
#include "comm/store/hash_store.h"
#include "core/error.h"
#include "ds/config.h"
#include "tests/support/skip.h"
#include "tests/support/spawn_ranks.h"

#if DS_HAVE_CUDA
#include <cuda_runtime.h>
#endif

using namespace ds;
using namespace ds::comm;

namespace {

GroupOptions opts() {
  GroupOptions o;
  o.timeout = std::chrono::seconds(60);
  return o;
}

#if DS_HAVE_CUDA
bool haveDevice() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

struct DeviceFloats {
  float* ptr = nullptr;
  size_t n = 0;
  explicit DeviceFloats(size_t count) : n(count) {
    if (cudaMalloc(&ptr, count * sizeof(float)) != cudaSuccess) throw Error("cudaMalloc failed");
  }
  ~DeviceFloats() { cudaFree(ptr); }
  void set(const std::vector<float>& v) {
    cudaMemcpy(ptr, v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice);
  }
  std::vector<float> get() const {
    std::vector<float> v(n);
    cudaMemcpy(v.data(), ptr, n * sizeof(float), cudaMemcpyDeviceToHost);
    return v;
  }
  BufferView view() const { return {ptr, n, DType::kF32, Device::kCuda}; }
};
#endif

}  // namespace

TEST_CASE("gloo on device buffers: staged collectives match host sums, 2 ranks on one GPU",
          "[gpu]") {
#if !DS_HAVE_CUDA
  DS_SKIP("built without CUDA");
#else
  if (!haveDevice()) DS_SKIP("no CUDA device");
  const int n = 2;
  const size_t count = 1000003;
  auto store = std::make_shared<HashStore>();
  std::vector<std::vector<float>> reduced(n), gathered(n), scattered(n), bcast(n);
  ds::test::runRanks(n, [&](int r) {
    cudaSetDevice(0);
    ProcessGroup pg(createBackend("gloo", store, r, n, opts()));
    std::vector<float> mine(count);
    for (size_t i = 0; i < count; ++i) mine[i] = float((i * 7 + size_t(r) * 3) % 101) * 0.25f;
    DeviceFloats a(count);
    a.set(mine);
    pg.allreduce(a.view())->wait();
    reduced[r] = a.get();
    std::vector<size_t> counts = {count / 2, count - count / 2};
    DeviceFloats part(counts[size_t(r)]), whole(count);
    part.set(std::vector<float>(counts[size_t(r)], float(r + 1)));
    pg.allgather(part.view(), whole.view(), counts)->wait();
    gathered[r] = whole.get();
    DeviceFloats in(count), out(counts[size_t(r)]);
    in.set(mine);
    pg.reduceScatter(in.view(), out.view(), counts)->wait();
    scattered[r] = out.get();
    DeviceFloats b(count);
    b.set(std::vector<float>(count, r == 1 ? 5.f : -1.f));
    pg.broadcast(b.view(), 1)->wait();
    bcast[r] = b.get();
  });
  for (int r = 0; r < n; ++r) {
    for (size_t i : {size_t{0}, size_t{1}, count / 2, count - 1}) {
      const float want = float((i * 7) % 101) * 0.25f + float((i * 7 + 3) % 101) * 0.25f;
      CHECK(reduced[size_t(r)][i] == want);
      CHECK(gathered[size_t(r)][i] == (i < count / 2 ? 1.f : 2.f));
      CHECK(bcast[size_t(r)][i] == 5.f);
    }
    const size_t off = r == 0 ? 0 : count / 2;
    const size_t i = scattered[size_t(r)].size() - 1;
    CHECK(scattered[size_t(r)][i] ==
          float(((off + i) * 7) % 101) * 0.25f + float(((off + i) * 7 + 3) % 101) * 0.25f);
  }
#endif
}

TEST_CASE("gloo: a device view with no device to stage through is a clear error", "[unit]") {
#if DS_HAVE_CUDA
  if (haveDevice()) DS_SKIP("a CUDA device is visible: the [gpu] case covers staging");
#endif
  auto store = std::make_shared<HashStore>();
  std::string err;
  ds::test::runRanks(1, [&](int r) {
    ProcessGroup pg(createBackend("gloo", store, r, 1, opts()));
    float bogus[4] = {};
    try {
      pg.allreduce({bogus, 4, DType::kF32, Device::kCuda})->wait();
    } catch (const Error& e) {
      err = e.what();
    }
  });
  CHECK_THAT(err, Catch::Contains("allreduce"));
}
