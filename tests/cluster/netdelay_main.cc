// ds_netdelay: the test cluster's delay line (scripts/test_cluster.sh --delay-us). Attaches to
// the TAP device --outer of its own network namespace (the bridge's side) and to --inner inside
// the namespace --netns (the simulated host's eth0), then forwards frames both ways, each held
// --delay-ns. Stays in the host's namespace, so stopping the cluster (which kills every process
// there) ends it too; SIGTERM/SIGINT end it with a summary on stderr. See docs/test_cluster.md.
#include <fmt/format.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "core/error.h"
#include "tests/cluster/delay_line.h"
#include "tests/cluster/tap_device.h"

namespace {

struct NetdelayOptions {
  std::string outer;  // TAP in this process's namespace
  std::string netns;  // /run/netns/NAME or a path
  std::string inner;  // TAP in that namespace
  int64_t delayNs = 0;
  size_t queueMib = 16;
};

ds::launcher::UniqueFd stopSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&set, sig);
  DS_SYS_CHECK(::sigprocmask(SIG_BLOCK, &set, nullptr), "ds_netdelay: sigprocmask");
  return ds::launcher::UniqueFd(
      DS_SYS_CHECK(::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK), "ds_netdelay: signalfd"));
}

int run(const NetdelayOptions& opts) {
  // Timer slack (50 us by default) would add to every delay; 1 ns asks for none.
  ::prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  auto stop = stopSignals();
  auto outer = ds::netdelay::openTap(opts.outer);
  const std::string nsPath =
      opts.netns.find('/') == std::string::npos ? "/run/netns/" + opts.netns : opts.netns;
  ds::netdelay::enterNetns(nsPath);
  auto inner = ds::netdelay::openTap(opts.inner);
  ds::netdelay::DelayLineOptions lineOpts;
  lineOpts.delayNs = opts.delayNs;
  lineOpts.queueBytes = opts.queueMib << 20;
  ds::netdelay::DelayLine line(outer.get(), inner.get(), lineOpts);
  std::printf("ds_netdelay: %s <-> %s:%s, %.1f us each way: forwarding\n", opts.outer.c_str(),
              nsPath.c_str(), opts.inner.c_str(), static_cast<double>(opts.delayNs) / 1e3);
  std::fflush(stdout);
  line.run(stop.get());
  std::fprintf(stderr, "ds_netdelay: %s <-> %s:%s stopped: %s\n", opts.outer.c_str(),
               nsPath.c_str(), opts.inner.c_str(), line.summary().c_str());
  return 0;
}

int parseAndRun(int argc, char** argv) {
  NetdelayOptions opts;
  CLI::App app{
      "ds_netdelay: a delay line between a TAP device here (--outer) and one in a network "
      "namespace (--inner): every frame waits --delay-ns before it goes on, both ways "
      "(scripts/test_cluster.sh --delay-us starts one per simulated host)"};
  app.add_option("--outer", opts.outer, "TAP device in this namespace (the bridge's port)")
      ->required();
  app.add_option("--netns", opts.netns,
                 "the host's network namespace: a name under /run/netns "
                 "or a path")
      ->required();
  app.add_option("--inner", opts.inner, "TAP device inside --netns (the host's eth0)")->required();
  app.add_option("--delay-ns", opts.delayNs, "one-way delay of each frame, nanoseconds")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--queue-mib", opts.queueMib,
                 "per direction: bytes that may be held at once (>= rate x delay), MiB")
      ->check(CLI::Range(1, 4096));
  CLI11_PARSE(app, argc, argv);
  return run(opts);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return parseAndRun(argc, argv);
  } catch (const std::exception& err) {
    std::fprintf(stderr, "ds_netdelay: %s\n", err.what());
    return ds::exitCodeFor(err);
  } catch (...) {
    std::fprintf(stderr, "ds_netdelay: unknown exception\n");
    return 1;
  }
}
