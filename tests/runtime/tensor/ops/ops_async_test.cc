// Ops' asynchronous copies (runtime/tensor/ops.h): pinned memory, the copy stream and the events
// that order it with compute. On the CPU ops (the synchronous defaults) [unit]; on a CUDA device
// [gpu]: a pinned round trip, a download that waits for queued compute through an event (without
// the wait the copy stream would read stale bytes), and a host wait that times out naming what.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "runtime/tensor/ops.h"
#include "tests/runtime/tensor/ops/cuda_test_util.h"
#include "tests/support/skip.h"

namespace {

using ds::runtime::Ops;
using ds::runtime::OpsBuffer;
using ds::runtime::OpsStream;
using ds::runtime::PinnedBuffer;
using std::chrono::milliseconds;

// host -> pinned -> device (copy stream) -> device (compute, after the upload's event) ->
// pinned (copy stream, after compute's event) -> host.
void roundTrip(Ops& ops) {
  const size_t n = 1 << 20;
  PinnedBuffer up(ops, n * sizeof(float), "test upload staging");
  PinnedBuffer down(ops, n * sizeof(float), "test download staging");
  for (size_t i = 0; i < n; ++i) up.as<float>()[i] = float(i % 977) * 0.5f;
  std::memset(down.get(), 0xff, down.bytes());
  OpsBuffer a(ops, n * sizeof(float), "a"), b(ops, n * sizeof(float), "b");
  auto uploaded = ops.newEvent(), computed = ops.newEvent(), downloaded = ops.newEvent();
  CHECK(ops.done(*uploaded));  // never recorded: complete
  ops.uploadAsync(a.get(), up.get(), up.bytes());
  ops.record(*uploaded, OpsStream::kCopy);
  ops.streamWait(OpsStream::kCompute, *uploaded);
  ops.copy(b.get(), a.get(), a.bytes());
  ops.scale(b.as<float>(), n, 2.f);
  ops.record(*computed, OpsStream::kCompute);
  ops.streamWait(OpsStream::kCopy, *computed);
  ops.downloadAsync(down.get(), b.get(), b.bytes());
  ops.record(*downloaded, OpsStream::kCopy);
  ops.hostWait(*downloaded, milliseconds(60000), "the test's round trip");
  CHECK(ops.done(*downloaded));
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) bad += down.as<float>()[i] != float(i % 977);
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("ops async copies on the cpu ops: synchronous, events complete", "[unit]") {
  auto ops = ds::runtime::makeCpuOps();
  roundTrip(*ops);
  PinnedBuffer moved(*ops, 64, "moved");
  PinnedBuffer into = std::move(moved);
  CHECK(moved.get() == nullptr);
  CHECK(into.bytes() == 64);
  CHECK(PinnedBuffer(*ops, 0, "empty").get() == nullptr);
}

TEST_CASE("cuda ops async copies: pinned round trip ordered by events", "[gpu]") {
  if (!ds::test::haveCudaDevice()) DS_SKIP("no CUDA device");
  auto ops = ds::runtime::makeCudaOps(0);
  roundTrip(*ops);
}

TEST_CASE("cuda ops async copies: a download waits for queued compute through its event", "[gpu]") {
  if (!ds::test::haveCudaDevice()) DS_SKIP("no CUDA device");
  auto ops = ds::runtime::makeCudaOps(0);
  const size_t big = size_t(64) << 20, n = 1 << 16;  // 256 MiB of busy work, 256 KiB result
  OpsBuffer work(*ops, big * sizeof(float), "busy work");
  OpsBuffer x(*ops, n * sizeof(float), "x"), y(*ops, n * sizeof(float), "y");
  std::vector<float> ones(n, 1.f), sevens(n, 7.f);
  ops->upload(x.get(), ones.data(), x.bytes());
  ops->upload(y.get(), sevens.data(), y.bytes());
  ops->zero(work.get(), work.bytes());
  ops->synchronize();
  PinnedBuffer down(*ops, x.bytes(), "download staging");
  auto computed = ops->newEvent(), downloaded = ops->newEvent();
  for (int r = 0; r < 40; ++r) ops->scale(work.as<float>(), big, 1.5f);  // tens of ms queued
  ops->copy(x.get(), y.get(), x.bytes());  // x becomes 7 only after the busy work
  ops->record(*computed, OpsStream::kCompute);
  ops->streamWait(OpsStream::kCopy, *computed);
  ops->downloadAsync(down.get(), x.get(), x.bytes());
  ops->record(*downloaded, OpsStream::kCopy);
  // The copy is queued behind the compute: a zero timeout fails naming what was waited for.
  if (!ops->done(*downloaded)) {
    try {
      ops->hostWait(*downloaded, milliseconds(0), "the test's gradients");
      FAIL("hostWait with a zero timeout returned before the event completed");
    } catch (const ds::TimeoutError& e) {
      CHECK(std::string(e.what()).find("the test's gradients") != std::string::npos);
      CHECK(std::string(e.what()).find("cuda:0") != std::string::npos);
    }
  }
  ops->hostWait(*downloaded, milliseconds(60000), "the test's download");
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) bad += down.as<float>()[i] != 7.f;
  CHECK(bad == 0);
  ops->synchronize();
}
