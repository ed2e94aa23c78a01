// Backend registry: maps a backend name ("gloo", "mpi", "nccl") to its factory. Registration is
// explicit (under DS_HAVE_MPI / DS_HAVE_NCCL from ds/config.h), never static self-registration.
// Not the bootstrap: the caller brings a connected Store and its rank/size (comm/bootstrap.h).
#pragma once

#include <memory>
#include <string>

#include "comm/backend.h"
#include "comm/process_group.h"
#include "comm/store/store.h"

namespace ds::comm {

// Creates a connected backend of the given kind; collective over all `size` ranks sharing the
// store (each passes its own rank). An empty name means defaultBackendName(). Asking for a
// backend not built into this binary throws ConfigError listing the built ones.
std::unique_ptr<Backend> createBackend(const std::string& name, std::shared_ptr<Store> store,
                                       int rank, int size, const GroupOptions& options);

// "nccl" where CUDA devices exist and nccl is built, else "gloo".
std::string defaultBackendName();

// Where a backend's buffers must live: Device::kCuda for "nccl", Device::kCpu otherwise.
Device bufferDevice(const std::string& backend);

}  // namespace ds::comm
