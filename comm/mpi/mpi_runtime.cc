// MPI init/finalize and error translation. Finalize runs from a static destructor so that a dsrt
// that returns from main (or calls exit) tells mpirun it ended cleanly.
#include "comm/mpi/mpi_runtime.h"

#include <cstdlib>
#include <mutex>

#include "core/core_knobs.h"
#include "core/error.h"

namespace ds::comm::mpi_impl {
namespace {

struct Runtime {
  std::once_flag once;
  bool initializedHere = false;
  ~Runtime() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (initializedHere && !finalized) MPI_Finalize();
  }
};

Runtime& runtime() {
  static Runtime r;
  return r;
}

}  // namespace

bool launchedByMpi() {
  return knobIsSet(knobs::kOmpiWorldSize) || knobIsSet(knobs::kPmixRank) ||
         knobIsSet(knobs::kPmiRank);
}

void ensureInitialized() {
  Runtime& r = runtime();
  std::call_once(r.once, [&r] {
    int already = 0;
    MPI_Initialized(&already);
    if (already) return;
    int provided = 0;
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
    r.initializedHere = true;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (provided < MPI_THREAD_MULTIPLE) {
      throw CommError(
          "the MPI library does not provide MPI_THREAD_MULTIPLE, which the mpi backend needs "
          "(Open MPI must be built with thread support); use --comm_backend gloo");
    }
  });
}

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw CommError(fmt::format("mpi: {} failed: {}", what, std::string(text, len)));
}

}  // namespace ds::comm::mpi_impl
