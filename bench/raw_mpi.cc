// Raw Open MPI peer for bench/comm_bench.sh: the very MPI calls our mpi backend makes for these
// collectives (comm/mpi/mpi_backend.cc) on fp32 sum: MPI_Allreduce (in place), MPI_Reduce_scatter
// (per-rank counts), MPI_Allgatherv (counts, displacements), timed like `dsrt comm-bench`.
// MPI is initialized at the thread level our backend needs (MPI_THREAD_MULTIPLE, see
// comm/mpi/mpi_runtime.h); DS_RAW_MPI_THREAD=single makes it plain MPI_Init, to measure what
// that level costs. Run under mpirun; sizes (bytes) as args.
#include "ds/config.h"

#if DS_HAVE_MPI
#include <mpi.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "bench/raw_timing.h"

int main(int argc, char** argv) {
  const bool single = ds::knobChoice(ds::knobs::kRawMpiThread) == "single";
  if (single) {
    MPI_Init(&argc, &argv);
  } else {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  }
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  MPI_Comm comm;  // a dup of the world, as our backend uses
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  auto barrier = [&] { MPI_Barrier(comm); };
  auto maxOf = [&](double x) {
    double m = 0;
    MPI_Allreduce(&x, &m, 1, MPI_DOUBLE, MPI_MAX, comm);
    return m;
  };
  const char* title = single ? "raw Open MPI (MPI_Init)" : "raw Open MPI (MPI_THREAD_MULTIPLE)";
  if (rank == 0) ds::bench::printHeader(title, n);
  for (const char* op : {"allreduce", "reduce_scatter", "allgather"}) {
    for (int a = 1; a < argc; ++a) {
      size_t count = std::strtoull(argv[a], nullptr, 10) / 4;
      std::vector<size_t> sh = ds::bench::shards(count, n);
      std::vector<int> counts(n), displs(n);
      for (int r = 0, off = 0; r < n; off += counts[r], ++r) {
        counts[r] = static_cast<int>(sh[r]);
        displs[r] = off;
      }
      std::vector<float> buf(count, 1.f), part(sh[rank], 1.f);
      std::function<void()> run;
      if (std::string(op) == "allreduce") {
        run = [&] {
          MPI_Allreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                        comm);
        };
      } else if (std::string(op) == "reduce_scatter") {
        run = [&] {
          MPI_Reduce_scatter(buf.data(), part.data(), counts.data(), MPI_FLOAT, MPI_SUM, comm);
        };
      } else {
        run = [&] {
          MPI_Allgatherv(part.data(), counts[rank], MPI_FLOAT, buf.data(), counts.data(),
                         displs.data(), MPI_FLOAT, comm);
        };
      }
      auto row = ds::bench::timeCollective(run, maxOf, barrier, ds::bench::targetSeconds());
      if (rank == 0) ds::bench::printRow(op, count * 4, n, row);
    }
  }
  MPI_Comm_free(&comm);
  MPI_Finalize();
  return 0;
}
#else
#include <cstdio>
int main() {
  std::fprintf(stderr, "bench_raw_mpi: this build has no MPI (DS_WITH_MPI)\n");
  return 2;
}
#endif
