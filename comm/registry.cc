// Backend registry: a fixed table of the backends compiled into this build (gloo always; mpi and
// nccl under DS_HAVE_MPI / DS_HAVE_NCCL). No static self-registration: the table is the truth.
#include "comm/registry.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "comm/gloo/gloo_backend.h"
#include "comm/shm/shm_backend.h"
#include "ds/config.h"
#if DS_HAVE_MPI
#include "comm/mpi/mpi_backend.h"
#endif
#if DS_HAVE_NCCL
#include "comm/nccl/nccl_backend.h"
#endif
#include "core/error.h"

namespace ds::comm {
namespace {

// nccl is the default only where it is built and a CUDA device is visible.
bool ncclUsable() {
#if DS_HAVE_NCCL
  return cudaDeviceCount() > 0;
#else
  return false;
#endif
}

}  // namespace

std::vector<std::string> builtBackends() {
  std::vector<std::string> names{"gloo"};
#if DS_HAVE_MPI
  names.push_back("mpi");
#endif
#if DS_HAVE_NCCL
  names.push_back("nccl");
#endif
  return names;
}

std::string defaultBackendName() { return ncclUsable() ? "nccl" : "gloo"; }

Device bufferDevice(const std::string& backend) {
  return backend == "nccl" ? Device::kCuda : Device::kCpu;
}

std::unique_ptr<Backend> createBackend(const std::string& name, std::shared_ptr<Store> store,
                                       int rank, int size, const GroupOptions& options) {
  std::string which = name.empty() ? defaultBackendName() : name;
  if (which == "gloo") {
    auto gloo = createGlooBackend(store, rank, size, options);
    if (!options.sharedMemory || !shmEnabledByEnv()) return gloo;
    return wrapWithShm(std::move(gloo), std::move(store),
                       shmOptionsFromEnv(options.timeout, "gloo"));
  }
#if DS_HAVE_MPI
  if (which == "mpi") return createMpiBackend(std::move(store), rank, size, options);
#endif
#if DS_HAVE_NCCL
  if (which == "nccl") return createNcclBackend(std::move(store), rank, size, options);
#endif
  throw ConfigError(fmt::format("comm backend '{}' is not built into this binary; built: {}", which,
                                fmt::join(builtBackends(), ", ")));
}

}  // namespace ds::comm
