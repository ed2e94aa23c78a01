// OpenMP + OpenBLAS thread control (see threads.h).
#include "runtime/tensor/threads.h"

#include <cblas.h>
#include <omp.h>

#include "core/error.h"

namespace ds::runtime {

void setComputeThreads(int n) {
  DS_CHECK(n >= 1, "thread count {} < 1", n);
  omp_set_dynamic(0);
  omp_set_num_threads(n);
  openblas_set_num_threads(1);
}

int computeThreads() { return omp_get_max_threads(); }

int blasThreads() { return openblas_get_num_threads(); }

std::string blasCoreName() {
  const char* n = openblas_get_corename();
  return n ? std::string(n) : std::string("unknown");
}

}  // namespace ds::runtime
