// `dsrt hello`: the built-in rank program that proves a launch. Prints this rank's host and rank
// environment, rendezvouses through rank 0's store (comm/bootstrap.h), joins a barrier (every
// rank increments a counter; the one that completes it releases the others), prints "all N ranks
// joined" and exits 0. With --allreduce it also connects the comm backend and checks a sum.
// Not a benchmark (comm-bench) and not a test harness: every wait has the DS_TIMEOUT deadline.
#include "runtime/cmd/hello_command.h"

#include <fmt/format.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <cstdio>

#include "comm/bootstrap.h"
#include "core/env.h"
#include "core/error.h"
#include "core/log.h"
#include "core/rank_env.h"

namespace ds::runtime {

namespace {

std::string hostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "?";
  return buf;
}

// Every rank adds 1 to "hello/joined"; the rank that brings it to N sets "hello/all-joined",
// which the others wait for on the server (no polling).
void storeBarrier(comm::Store& store, int worldSize, std::chrono::milliseconds timeout) {
  if (store.add("hello/joined", 1) == worldSize) store.setString("hello/all-joined", "1");
  try {
    store.wait({"hello/all-joined"}, timeout);
  } catch (const TimeoutError& e) {
    auto joined = store.getString("hello/joined", std::chrono::milliseconds(0));
    throw TimeoutError(
        fmt::format("hello barrier: only {} of {} ranks joined ({})", joined, worldSize, e.what()));
  }
}

// Allreduce of (rank + 1) over the backend; the sum must be N(N+1)/2.
void checkAllreduce(const comm::Rendezvous& rv, const std::string& backend) {
  auto pg = comm::connectGroup(rv, backend);
  float x = static_cast<float>(rv.env.rank + 1);
  pg->allreduce(comm::view(&x, 1))->wait();
  double n = rv.env.worldSize, want = n * (n + 1) / 2;
  if (x != static_cast<float>(want))
    throw CommError(fmt::format("hello: allreduce over {} gave {} on rank {}, expected {}", backend,
                                x, rv.env.rank, want));
  pg->barrier()->wait();
  std::printf("[rank %d] allreduce over %s ok (sum %g)\n", rv.env.rank, backend.c_str(), x);
}

}  // namespace

int helloCommand(int argc, char** argv) {
  int localRank = -1;
  std::string backendFlag;
  bool allreduce = false;
  CLI::App app{
      "dsrt hello: print this rank's environment, join every rank through the store, "
      "exit 0",
      "dsrt hello"};
  app.add_option("--local_rank", localRank, "set by the launcher (checked against LOCAL_RANK)");
  app.add_option("--comm_backend,--backend", backendFlag,
                 "gloo | mpi | nccl (default: dsrun's flag, DS_COMM_BACKEND, auto)");
  app.add_flag("--allreduce", allreduce, "also connect the backend and check an allreduce");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::printf("%s", app.help().c_str());
    return 0;
  } catch (const CLI::ParseError& e) {
    throw ConfigError(fmt::format("dsrt hello: {} (see dsrt hello --help)", e.what()));
  }

  RankEnv env = deriveRankEnv(currentEnv());
  std::string host = hostName();
  log::setLogIdentity(host, env.rank);
  if (localRank >= 0 && localRank != env.localRank)
    throw ConfigError(
        fmt::format("dsrt hello: --local_rank={} but LOCAL_RANK={}", localRank, env.localRank));
  comm::BootstrapOptions bo;
  bo.backend = backendFlag;
  std::string backend = comm::chooseBackend(bo, env);
  std::printf(
      "[rank %d] hello from %s: RANK=%d LOCAL_RANK=%d WORLD_SIZE=%d LOCAL_SIZE=%d "
      "CROSS_RANK=%d CROSS_SIZE=%d MASTER_ADDR=%s MASTER_PORT=%d backend=%s "
      "launcher=%s pid=%d\n",
      env.rank, host.c_str(), env.rank, env.localRank, env.worldSize, env.localSize, env.crossRank,
      env.crossSize, env.masterAddr.c_str(), env.masterPort, backend.c_str(),
      rankSourceName(env.source), static_cast<int>(::getpid()));
  std::fflush(stdout);

  auto timeout = comm::bootstrapTimeout(bo);
  if (allreduce) comm::requireBuiltBackend(backend);
  comm::Rendezvous rv = comm::rendezvous(env, timeout);
  storeBarrier(*rv.store, env.worldSize, timeout);
  std::printf("[rank %d] all %d ranks joined\n", env.rank, env.worldSize);
  std::fflush(stdout);
  if (allreduce) checkAllreduce(rv, backend);
  return 0;
}

}  // namespace ds::runtime
