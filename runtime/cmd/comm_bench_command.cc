// `dsrt comm-bench [--comm_backend B] [-b MIN] [-e MAX] [-f FACTOR] [--sizes LIST] [--ops LIST]`:
// bootstraps the job's process group (comm/bootstrap.h) and runs runCommBench on it; rank 0
// prints the table. Exit 1 when any result was wrong. Sizes take K, M, G suffixes (powers of 2).
#include "runtime/cmd/comm_bench_command.h"

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <cstdio>

#include "comm/bootstrap.h"
#include "core/error.h"
#include "core/log.h"
#include "runtime/cmd/comm_bench.h"

namespace ds::runtime {
namespace {

size_t parseBytes(const std::string& text) {
  size_t pos = 0;
  unsigned long long v = 0;
  try {
    v = std::stoull(text, &pos);
  } catch (const std::exception&) {
    pos = 0;
  }
  std::string suffix = text.substr(pos);
  size_t mult = suffix.empty() || suffix == "B"    ? 1
                : suffix == "K" || suffix == "KiB" ? size_t{1} << 10
                : suffix == "M" || suffix == "MiB" ? size_t{1} << 20
                : suffix == "G" || suffix == "GiB" ? size_t{1} << 30
                                                   : 0;
  if (pos == 0 || mult == 0 || v == 0) {
    throw ConfigError(fmt::format(
        "comm-bench: size '{}': expected a positive byte count with an optional K, M or G suffix",
        text));
  }
  return static_cast<size_t>(v) * mult;
}

}  // namespace

int commBenchCommand(int argc, char** argv) {
  std::string backend, minB = "8", maxB = "256M", sizesText, opsText;
  double factor = 4.0;
  int localRank = -1;
  CommBenchOptions o;
  CLI::App app{"dsrt comm-bench: collective bandwidth (algbw, busbw) with checked results",
               "dsrt comm-bench"};
  app.add_option("--comm_backend,--backend", backend,
                 "gloo | mpi | nccl (default: dsrun's flag, DS_COMM_BACKEND, auto)");
  app.add_option("-b,--min_bytes", minB, "smallest size (default 8)");
  app.add_option("-e,--max_bytes", maxB, "largest size (default 256M)");
  app.add_option("-f,--factor", factor, "size multiplier between rows (default 4)");
  app.add_option("--sizes", sizesText, "explicit comma-separated sizes, e.g. 1M,16M,128M");
  app.add_option("--ops", opsText,
                 "comma-separated collectives (default allreduce,reduce_scatter,allgather,"
                 "broadcast)");
  app.add_option("--warmup", o.warmup, "untimed rounds per row (default 2)");
  app.add_option("--target_seconds", o.targetSeconds, "timed seconds per row (default 0.5)");
  std::string hostBuffers = "shared";
  app.add_option("--host_buffers", hostBuffers,
                 "shared (default): host buffers in shared memory, which the local ranks' "
                 "shared-memory transport reads and writes in place, as it does ZeRO stage 0's "
                 "gradients; private: ordinary memory, copied with CMA (DS_COMM_SHM_MAP=0 makes "
                 "every buffer private)")
      ->check(CLI::IsMember({"shared", "private"}));
  bool noCheck = false;
  app.add_flag("--no_check", noCheck, "skip the result checks");
  app.add_option("--local_rank", localRank, "set by the launcher (ignored)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::printf("%s", app.help().c_str());
    return 0;
  } catch (const CLI::ParseError& e) {
    throw ConfigError(fmt::format("dsrt comm-bench: {} (see dsrt comm-bench --help)", e.what()));
  }
  o.check = !noCheck;
  o.sharedHostBuffers = hostBuffers == "shared";
  if (!sizesText.empty()) {
    for (auto& s : CLI::detail::split(sizesText, ',')) o.sizes.push_back(parseBytes(s));
  } else {
    o.sizes = sizeSweep(parseBytes(minB), parseBytes(maxB), factor);
  }
  if (!opsText.empty()) o.ops = CLI::detail::split(opsText, ',');

  comm::BootstrapOptions bo;
  bo.backend = backend;
  auto pg = comm::bootstrap(bo);
  log::setLogIdentity("", pg->rank());
  auto rows = runCommBench(*pg, o);
  if (pg->rank() == 0) {
    std::printf("%s", formatCommBench(rows, pg->backendName(), pg->size()).c_str());
    std::fflush(stdout);
  }
  for (const auto& r : rows) {
    if (!r.correct) {
      DS_LOG_ERROR("comm-bench", "{} of {} bytes gave a wrong result", r.op, r.bytes);
      return 1;
    }
  }
  return 0;
}

}  // namespace ds::runtime
