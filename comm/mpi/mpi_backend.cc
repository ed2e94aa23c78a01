// MpiBackend: one MPI communicator (a dup of MPI_COMM_WORLD, or a split of it for subgroups) and
// its worker thread. Collectives are blocking MPI calls run on the worker in issue order; send
// and recv are posted at once from the issuing thread (so matching pairs can never deadlock
// behind a collective) and waited on by a second thread. fp16/bf16 reductions are staged in fp32.
// A dead peer: Open MPI's runtime aborts the whole job, so no survivor waits forever.
#include "comm/mpi/mpi_backend.h"

#include <mpi.h>

#include <algorithm>

#include "comm/mpi/mpi_runtime.h"
#include "comm/mpi/mpi_types.h"
#include "comm/serial_worker.h"
#include "core/env.h"
#include "core/error.h"

namespace ds::comm {
namespace {

using namespace mpi_impl;

class MpiBackend final : public Backend {
 public:
  explicit MpiBackend(MPI_Comm comm) : comm_(comm) {
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
    check(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
  }

  ~MpiBackend() override {
    worker_.reset();
    p2p_.reset();
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }

  WorkPtr allreduce(BufferView buf, ReduceOp op) override {
    return worker_->submit("mpi allreduce", [this, buf, op] {
      int n = mpiCount(buf.count, "allreduce");
      MPI_Datatype type = reduceType(buf.dtype);
      if (isHalf(buf.dtype)) {
        std::vector<float> w = widen(buf.data, buf.dtype, buf.count);
        check(MPI_Allreduce(MPI_IN_PLACE, w.data(), n, type, mpiOp(op), comm_), "MPI_Allreduce");
        if (op == ReduceOp::kAvg) finishAvg(w.data(), type, w.size(), size_);
        narrow(w.data(), buf.dtype, buf.data, buf.count);
        return;
      }
      check(MPI_Allreduce(MPI_IN_PLACE, buf.data, n, type, mpiOp(op), comm_), "MPI_Allreduce");
      if (op == ReduceOp::kAvg) finishAvg(buf.data, type, buf.count, size_);
    });
  }

  WorkPtr reduceScatter(BufferView input, BufferView output, const std::vector<size_t>& counts,
                        ReduceOp op) override {
    return worker_->submit("mpi reduce_scatter", [this, input, output, counts, op] {
      std::vector<int> recv(counts.size());
      for (size_t i = 0; i < counts.size(); ++i) recv[i] = mpiCount(counts[i], "reduce_scatter");
      mpiCount(input.count, "reduce_scatter");
      MPI_Datatype type = reduceType(input.dtype);
      if (isHalf(input.dtype)) {
        std::vector<float> in = widen(input.data, input.dtype, input.count);
        std::vector<float> out(output.count);
        check(MPI_Reduce_scatter(in.data(), out.data(), recv.data(), type, mpiOp(op), comm_),
              "MPI_Reduce_scatter");
        if (op == ReduceOp::kAvg) finishAvg(out.data(), type, out.size(), size_);
        narrow(out.data(), output.dtype, output.data, output.count);
        return;
      }
      check(MPI_Reduce_scatter(input.data, output.data, recv.data(), type, mpiOp(op), comm_),
            "MPI_Reduce_scatter");
      if (op == ReduceOp::kAvg) finishAvg(output.data, type, output.count, size_);
    });
  }

  WorkPtr allgather(BufferView input, BufferView output,
                    const std::vector<size_t>& counts) override {
    return worker_->submit("mpi allgather", [this, input, output, counts] {
      std::vector<int> cnt(counts.size()), displ(counts.size());
      size_t off = 0;
      for (size_t i = 0; i < counts.size(); ++i) {
        cnt[i] = mpiCount(counts[i], "allgather");
        displ[i] = mpiCount(off, "allgather");
        off += counts[i];
      }
      MPI_Datatype type = copyType(input.dtype);
      size_t esz = dtypeSize(input.dtype);
      const void* mine = static_cast<const char*>(output.data) + size_t(displ[rank_]) * esz;
      const void* send = input.data == mine ? MPI_IN_PLACE : input.data;
      check(MPI_Allgatherv(send, cnt[rank_], type, output.data, cnt.data(), displ.data(), type,
                           comm_),
            "MPI_Allgatherv");
    });
  }

  WorkPtr broadcast(BufferView buf, int root) override {
    return worker_->submit("mpi broadcast", [this, buf, root] {
      check(MPI_Bcast(buf.data, mpiCount(buf.count, "broadcast"), copyType(buf.dtype), root, comm_),
            "MPI_Bcast");
    });
  }

  WorkPtr reduce(BufferView buf, int root, ReduceOp op) override {
    return worker_->submit("mpi reduce", [this, buf, root, op] {
      int n = mpiCount(buf.count, "reduce");
      MPI_Datatype type = reduceType(buf.dtype);
      bool isRoot = rank_ == root;
      if (isHalf(buf.dtype)) {
        std::vector<float> w = widen(buf.data, buf.dtype, buf.count);
        check(
            MPI_Reduce(isRoot ? MPI_IN_PLACE : w.data(), w.data(), n, type, mpiOp(op), root, comm_),
            "MPI_Reduce");
        if (!isRoot) return;
        if (op == ReduceOp::kAvg) finishAvg(w.data(), type, w.size(), size_);
        narrow(w.data(), buf.dtype, buf.data, buf.count);
        return;
      }
      check(MPI_Reduce(isRoot ? MPI_IN_PLACE : buf.data, isRoot ? buf.data : nullptr, n, type,
                       mpiOp(op), root, comm_),
            "MPI_Reduce");
      if (isRoot && op == ReduceOp::kAvg) finishAvg(buf.data, type, buf.count, size_);
    });
  }

  WorkPtr barrier() override {
    return worker_->submit("mpi barrier", [this] { check(MPI_Barrier(comm_), "MPI_Barrier"); });
  }

  WorkPtr send(BufferView buf, int dst, int tag) override {
    MPI_Request req;
    check(MPI_Isend(buf.data, mpiCount(buf.count, "send"), copyType(buf.dtype), dst, tag, comm_,
                    &req),
          "MPI_Isend");
    return waitLater(fmt::format("mpi send to rank {} (tag {})", dst, tag), req);
  }

  WorkPtr recv(BufferView buf, int src, int tag) override {
    MPI_Request req;
    check(MPI_Irecv(buf.data, mpiCount(buf.count, "recv"), copyType(buf.dtype), src, tag, comm_,
                    &req),
          "MPI_Irecv");
    return waitLater(fmt::format("mpi recv from rank {} (tag {})", src, tag), req);
  }

  std::unique_ptr<Backend> newSubgroup(const std::vector<int>& ranks) override {
    auto it = std::find(ranks.begin(), ranks.end(), rank_);
    int color = it == ranks.end() ? MPI_UNDEFINED : 0;
    int key = static_cast<int>(it - ranks.begin());
    MPI_Comm sub = MPI_COMM_NULL;
    // Ordered with this group's collectives: MPI_Comm_split is one of them.
    worker_
        ->submit("mpi newSubgroup",
                 [&] { check(MPI_Comm_split(comm_, color, key, &sub), "MPI_Comm_split"); })
        ->wait();
    if (sub == MPI_COMM_NULL) return nullptr;
    return std::make_unique<MpiBackend>(sub);
  }

 private:
  WorkPtr waitLater(std::string what, MPI_Request req) {
    return p2p_->submit(std::move(what), [req]() mutable {
      MPI_Status st;
      check(MPI_Wait(&req, &st), "MPI_Wait");
    });
  }

  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  std::string name_ = "mpi";
  // A wait() with the default timeout runs its collective itself when it is next in line (MPI
  // calls block without a timeout anyway; MPI_THREAD_MULTIPLE allows any thread).
  std::unique_ptr<SerialWorker> worker_ = std::make_unique<SerialWorker>(defaultTimeout());
  std::unique_ptr<SerialWorker> p2p_ = std::make_unique<SerialWorker>(defaultTimeout());
};

}  // namespace

std::unique_ptr<Backend> createMpiBackend(std::shared_ptr<Store>, int rank, int size,
                                          const GroupOptions&) {
  if (size > 1 && !launchedByMpi()) {
    throw ConfigError(
        "comm backend 'mpi' needs ranks started by mpirun: use `dsrun --launcher openmpi` "
        "(or run dsrt under mpirun), or choose --comm_backend gloo");
  }
  ensureInitialized();
  int worldRank = 0, worldSize = 0;
  check(MPI_Comm_rank(MPI_COMM_WORLD, &worldRank), "MPI_Comm_rank");
  check(MPI_Comm_size(MPI_COMM_WORLD, &worldSize), "MPI_Comm_size");
  if (worldRank != rank || worldSize != size) {
    throw ConfigError(fmt::format(
        "comm backend 'mpi': MPI says rank {} of {}, the rank environment says rank {} of {}; "
        "start every rank with the same launcher (dsrun --launcher openmpi)",
        worldRank, worldSize, rank, size));
  }
  MPI_Comm comm;
  check(MPI_Comm_dup(MPI_COMM_WORLD, &comm), "MPI_Comm_dup");
  return std::make_unique<MpiBackend>(comm);
}

}  // namespace ds::comm
