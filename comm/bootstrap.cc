// Bootstrap: rank environment -> TcpStore -> arrival keys -> createBackend -> ProcessGroup.
#include "comm/bootstrap.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>

#include "comm/comm_knobs.h"
#include "comm/registry.h"
#include "comm/shm/shm_backend.h"
#include "comm/store/prefix_store.h"
#include "comm/store/tcp_store.h"
#include "core/core_knobs.h"
#include "core/error.h"
#include "core/log.h"

namespace ds::comm {

namespace {

std::string arrivalKey(int r) { return "bootstrap/rank/" + std::to_string(r); }

std::string hostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "?";
  return buf;
}

std::string toString(const Bytes& b) { return std::string(b.begin(), b.end()); }

double secs(std::chrono::milliseconds t) { return std::chrono::duration<double>(t).count(); }

}  // namespace

std::string missingRanks(Store& store, int worldSize, size_t limit) {
  std::vector<int> missing;
  for (int r = 0; r < worldSize; ++r)
    if (!store.check({arrivalKey(r)})) missing.push_back(r);
  std::string out;
  for (size_t i = 0; i < missing.size() && i < limit; ++i)
    out += (i ? ", " : "") + std::to_string(missing[i]);
  if (missing.size() > limit) out += fmt::format(" and {} more", missing.size() - limit);
  return out;
}

std::chrono::milliseconds bootstrapTimeout(const BootstrapOptions& o) {
  if (o.timeout.count() > 0) return o.timeout;
  if (!o.env) return ds::defaultTimeout();
  return knobSecondsOrDefault(knobs::kTimeout, *o.env);
}

BackendChoice resolveBackend(const std::string& dsrtFlag, const std::string& dsrunFlag,
                             const std::string& plan, const std::string& envVar) {
  if (!dsrtFlag.empty()) return {dsrtFlag, "dsrt --comm_backend"};
  if (!dsrunFlag.empty()) return {dsrunFlag, "dsrun --comm_backend (DS_COMM_BACKEND_FLAG)"};
  if (!plan.empty()) return {plan, "the plan's comm_backend"};
  if (!envVar.empty()) return {envVar, "DS_COMM_BACKEND"};
  return {defaultBackendName(), "the default"};
}

BackendChoice chooseBackendWithSource(const BootstrapOptions& o, const RankEnv& env) {
  return resolveBackend(o.backend, env.commBackendFlag, o.planBackend, env.commBackend);
}

std::string chooseBackend(const BootstrapOptions& o, const RankEnv& env) {
  return chooseBackendWithSource(o, env).name;
}

namespace {

std::shared_ptr<TcpStore> connectStore(const RankEnv& env, std::chrono::milliseconds timeout,
                                       const std::string& bindAddr) {
  TcpStoreOptions so;
  so.host = env.masterAddr;
  so.port = env.masterPort;
  so.isServer = env.rank == 0;
  so.bindHost = bindAddr;
  so.token = env.jobToken;
  so.timeout = timeout;
  try {
    return std::make_shared<TcpStore>(so);
  } catch (const TimeoutError& e) {
    throw TimeoutError(
        fmt::format("rank {} of {}: rendezvous failed: rank 0 never opened the "
                    "store ({}) [DS_TIMEOUT={} s]",
                    env.rank, env.worldSize, e.what(), secs(timeout)));
  } catch (const CommError& e) {
    throw CommError(
        fmt::format("rank {} of {}: rendezvous failed: {}", env.rank, env.worldSize, e.what()),
        env.rank == 0 ? -1 : 0);
  }
}

// Claims "bootstrap/rank/<r>" for this process and checks WORLD_SIZE agreement.
void announce(Store& store, const RankEnv& env) {
  std::string me = fmt::format("{} pid {}", hostName(), ::getpid());
  Bytes mine(me.begin(), me.end());
  Bytes now = store.compareSet(arrivalKey(env.rank), {}, mine);
  if (now != mine)
    throw ConfigError(
        fmt::format("two processes claim RANK={}: {} and {} (check the launcher's "
                    "RANK/WORLD_SIZE variables)",
                    env.rank, toString(now), me));
  std::string ws = std::to_string(env.worldSize);
  Bytes wsb(ws.begin(), ws.end());
  Bytes agreed = store.compareSet("bootstrap/world_size", {}, wsb);
  if (agreed != wsb)
    throw ConfigError(
        fmt::format("rank {} has WORLD_SIZE={} but other ranks of this job have "
                    "WORLD_SIZE={}",
                    env.rank, ws, toString(agreed)));
}

}  // namespace

Rendezvous rendezvous(const RankEnv& env, std::chrono::milliseconds timeout) {
  DS_CHECK(env.worldSize >= 1 && env.rank >= 0 && env.rank < env.worldSize,
           "rank {} of world size {}", env.rank, env.worldSize);
  auto start = std::chrono::steady_clock::now();
  std::string bindAddr = knobString(knobs::kStoreBindAddr).value_or("");
  auto store = connectStore(env, timeout, bindAddr);
  announce(*store, env);
  std::vector<std::string> keys;
  for (int r = 0; r < env.worldSize; ++r) keys.push_back(arrivalKey(r));
  auto left = timeout - std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::steady_clock::now() - start);
  try {
    store->wait(keys, std::max(left, std::chrono::milliseconds(0)));
  } catch (const TimeoutError&) {
    std::string missing = missingRanks(*store, env.worldSize);
    throw TimeoutError(fmt::format(
        "rank {} of {}: rendezvous at {} timed out after {:.1f} s; rank(s) that never arrived: "
        "{} [DS_TIMEOUT={} s]",
        env.rank, env.worldSize, store->address(),
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), missing,
        secs(timeout)));
  }
  DS_LOG_DEBUG("comm", "rank {} of {}: all ranks arrived at the store {}", env.rank, env.worldSize,
               store->address());
  return Rendezvous{env, store, timeout};
}

void requireBuiltBackend(const std::string& name) {
  auto built = builtBackends();
  if (std::find(built.begin(), built.end(), name) == built.end())
    throw ConfigError(fmt::format("comm backend '{}' is not built into this binary; built: {}",
                                  name, fmt::join(built, ", ")));
}

std::unique_ptr<ProcessGroup> connectGroup(const Rendezvous& rv, const std::string& backend,
                                           const std::string& hostAddr) {
  GroupOptions go;
  go.backend = backend;
  go.timeout = rv.timeout;
  go.hostAddr = hostAddr;
  auto store = std::make_shared<PrefixStore>("pg/world", rv.store);
  auto be = createBackend(backend, store, rv.env.rank, rv.env.worldSize, go);
  // mpi: a one-host job's collectives from DS_MPI_SHM_MIN_BYTES up go through shared memory.
  // Here rather than in createBackend: only a bootstrapped job is sure to share one store.
  if (be->name() == "mpi" && shmEnabledByEnv()) {
    ShmOptions so = shmOptionsFromEnv(rv.timeout, "mpi");
    if (so.minBytes > 0) be = wrapWithShm(std::move(be), store, so);
  }
  return std::make_unique<ProcessGroup>(std::move(be));
}

std::unique_ptr<ProcessGroup> bootstrap(const BootstrapOptions& options) {
  RankEnv env = deriveRankEnv(options.env ? *options.env : currentEnv());
  auto timeout = bootstrapTimeout(options);
  BackendChoice choice = chooseBackendWithSource(options, env);
  try {
    requireBuiltBackend(choice.name);  // fail before waiting for the others
  } catch (const ConfigError& e) {
    throw ConfigError(fmt::format("{} (chosen by {})", e.what(), choice.source));
  }
  if (env.rank == 0) DS_LOG_INFO("comm", "comm backend '{}' (from {})", choice.name, choice.source);
  return connectGroup(rendezvous(env, timeout), choice.name, options.hostAddr);
}

}  // namespace ds::comm
