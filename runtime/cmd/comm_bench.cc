// Comm benchmark: timing loop, result checks and the table. Buffers are fp32; inputs are small
// integers so every sum is exact and checks compare exactly. Buffers live where the backend
// wants them (BenchBuffer: device memory for nccl; host memory shared with the local peers, as
// ZeRO stage 0's gradients, unless --host_buffers private); inputs and checks go through the host
// copy.
#include "runtime/cmd/comm_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "comm/registry.h"
#include "core/error.h"
#include "runtime/cmd/comm_bench_buffer.h"

namespace ds::runtime {
namespace {

using comm::ProcessGroup;
using comm::ReduceOp;
using Clock = std::chrono::steady_clock;

float inputAt(int rank, size_t i) {
  return static_cast<float>((rank + 1) + static_cast<int>(i % 7));
}

double busFactor(const std::string& op, int n) {
  if (n <= 1) return 1.0;
  if (op == "allreduce") return 2.0 * (n - 1) / n;
  if (op == "reduce_scatter" || op == "allgather") return double(n - 1) / n;
  return 1.0;
}

// Equal shards of `count` elements, the remainder spread over the first ranks.
std::vector<size_t> shards(size_t count, int n) {
  std::vector<size_t> c(n, count / n);
  for (size_t r = 0; r < count % n; ++r) ++c[r];
  return c;
}

size_t offsetOf(const std::vector<size_t>& counts, int r) {
  size_t off = 0;
  for (int i = 0; i < r; ++i) off += counts[i];
  return off;
}

struct Buffers {
  Buffers(size_t fullCount, size_t partCount, comm::Device d, bool sharedHost)
      : full(fullCount, d, sharedHost), part(partCount, d, sharedHost) {}
  BenchBuffer full, part;
};

// Fills inputs for one check round (on the host, then copied to the device when there is one).
void fillInputs(const std::string& op, Buffers& b, int rank, const std::vector<size_t>& counts) {
  auto& full = b.full.host();
  auto& part = b.part.host();
  if (op == "allgather") {
    size_t off = offsetOf(counts, rank);
    for (size_t i = 0; i < part.size(); ++i) part[i] = inputAt(rank, off + i);
    std::fill(full.begin(), full.end(), -1.f);
  } else if (op == "broadcast") {
    for (size_t i = 0; i < full.size(); ++i) full[i] = rank == 0 ? inputAt(0, i) : -1.f;
  } else {
    for (size_t i = 0; i < full.size(); ++i) full[i] = inputAt(rank, i);
  }
  b.full.upload();
  b.part.upload();
}

comm::WorkPtr issue(ProcessGroup& pg, const std::string& op, Buffers& b,
                    const std::vector<size_t>& counts) {
  if (op == "allreduce") return pg.allreduce(b.full.view());
  if (op == "reduce_scatter") return pg.reduceScatter(b.full.view(), b.part.view(), counts);
  if (op == "allgather") return pg.allgather(b.part.view(), b.full.view(), counts);
  if (op == "broadcast") return pg.broadcast(b.full.view(), 0);
  throw ConfigError(fmt::format(
      "comm-bench: unknown collective '{}' (expected allreduce, reduce_scatter, allgather, "
      "broadcast)",
      op));
}

// Checks the host copies (the caller downloads first).
bool verify(const std::string& op, const Buffers& bufs, int rank, int n,
            const std::vector<size_t>& counts) {
  const auto& full = bufs.full.host();
  const auto& part = bufs.part.host();
  float rankSum = static_cast<float>(n * (n + 1) / 2);
  if (op == "allreduce") {
    for (size_t i = 0; i < full.size(); ++i)
      if (full[i] != rankSum + static_cast<float>(n) * static_cast<float>(i % 7)) return false;
  } else if (op == "reduce_scatter") {
    size_t off = offsetOf(counts, rank);
    for (size_t i = 0; i < part.size(); ++i)
      if (part[i] != rankSum + static_cast<float>(n) * static_cast<float>((off + i) % 7))
        return false;
  } else if (op == "allgather") {
    int owner = 0;
    size_t end = counts.empty() ? 0 : counts[0];
    for (size_t i = 0; i < full.size(); ++i) {
      while (i >= end) end += counts[++owner];
      if (full[i] != inputAt(owner, i)) return false;
    }
  } else {
    for (size_t i = 0; i < full.size(); ++i)
      if (full[i] != inputAt(0, i)) return false;
  }
  return true;
}

// op over one float from every rank, in a buffer where the backend wants it.
float allreduceScalar(ProcessGroup& pg, float x, ReduceOp op) {
  BenchBuffer v(1, comm::bufferDevice(pg.backendName()));
  v.host()[0] = x;
  v.upload();
  pg.allreduce(v.view(), op)->wait();
  v.download();
  return v.host()[0];
}

double slowest(ProcessGroup& pg, double seconds) {
  return allreduceScalar(pg, static_cast<float>(seconds), ReduceOp::kMax);
}

CommBenchRow benchOne(ProcessGroup& pg, const std::string& op, size_t bytes,
                      const CommBenchOptions& o) {
  const int n = pg.size(), rank = pg.rank();
  CommBenchRow row;
  row.op = op;
  row.count = std::max<size_t>(bytes / sizeof(float), 1);
  row.bytes = row.count * sizeof(float);
  auto counts = shards(row.count, n);
  Buffers b(row.count, counts[rank], comm::bufferDevice(pg.backendName()), o.sharedHostBuffers);
  fillInputs(op, b, rank, counts);
  for (int i = 0; i < o.warmup; ++i) issue(pg, op, b, counts)->wait();
  // One timed probe decides the iteration count (identical on every rank: the slowest's).
  pg.barrier()->wait();
  auto t0 = Clock::now();
  issue(pg, op, b, counts)->wait();
  double probe = slowest(pg, std::chrono::duration<double>(Clock::now() - t0).count());
  row.iters = static_cast<int>(std::clamp(o.targetSeconds / std::max(probe, 1e-6), 3.0, 5000.0));
  pg.barrier()->wait();
  t0 = Clock::now();
  for (int i = 0; i < row.iters; ++i) issue(pg, op, b, counts)->wait();
  row.seconds = slowest(pg, std::chrono::duration<double>(Clock::now() - t0).count()) / row.iters;
  row.algbw = static_cast<double>(row.bytes) / row.seconds / 1e9;
  row.busbw = row.algbw * busFactor(op, n);
  if (o.check) {
    fillInputs(op, b, rank, counts);
    issue(pg, op, b, counts)->wait();
    b.full.download();
    b.part.download();
    float ok = verify(op, b, rank, n, counts) ? 1.f : 0.f;
    row.checked = true;
    row.correct = allreduceScalar(pg, ok, ReduceOp::kMin) == 1.f;
  }
  return row;
}

}  // namespace

std::vector<size_t> sizeSweep(size_t lo, size_t hi, double factor) {
  if (lo == 0 || hi < lo || factor <= 1.0) {
    throw ConfigError(fmt::format(
        "comm-bench: size sweep needs 0 < min_bytes <= max_bytes and factor > 1 (got {}, {}, {})",
        lo, hi, factor));
  }
  std::vector<size_t> out;
  for (double s = static_cast<double>(lo); s < static_cast<double>(hi); s *= factor)
    out.push_back(static_cast<size_t>(s));
  out.push_back(hi);
  return out;
}

std::vector<CommBenchRow> runCommBench(ProcessGroup& pg, const CommBenchOptions& opts) {
  std::vector<CommBenchRow> rows;
  for (const auto& op : opts.ops)
    for (size_t bytes : opts.sizes) rows.push_back(benchOne(pg, op, bytes, opts));
  return rows;
}

std::string formatCommBench(const std::vector<CommBenchRow>& rows, const std::string& backend,
                            int worldSize) {
  std::string out =
      fmt::format("# dsrt comm-bench: backend {}, {} ranks, fp32\n", backend, worldSize);
  out += fmt::format("{:<15} {:>12} {:>11} {:>6} {:>11} {:>9} {:>9} {:>6}\n", "collective", "bytes",
                     "count", "iters", "time_us", "algbw", "busbw", "check");
  for (const auto& r : rows) {
    out += fmt::format("{:<15} {:>12} {:>11} {:>6} {:>11.1f} {:>9.3f} {:>9.3f} {:>6}\n", r.op,
                       r.bytes, r.count, r.iters, r.seconds * 1e6, r.algbw, r.busbw,
                       !r.checked  ? "-"
                       : r.correct ? "ok"
                                   : "WRONG");
  }
  return out;
}

}  // namespace ds::runtime
