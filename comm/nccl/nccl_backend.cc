// NcclBackend: one ncclComm_t and one non-blocking CUDA stream per group. Collectives are
// enqueued on the stream from the issuing thread (NCCL orders them per stream), each after the
// group's stream waits on an event recorded on the caller's current (default) stream, so the
// kernels and copies that produced the buffer finish first (a non-blocking stream does not
// synchronise with the legacy default stream by itself). Uneven
// reduce_scatter / allgather become grouped ncclReduce / ncclBroadcast calls, one per block.
// Subgroups use ncclCommSplit. fp16/bf16 reductions run in NCCL's own kernels.
#include "comm/nccl/nccl_backend.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <numeric>

#include "comm/nccl/nccl_check.h"
#include "comm/nccl/nccl_work.h"
#include "core/env.h"
#include "core/error.h"

namespace ds::comm {
namespace {

using namespace nccl_impl;

ncclDataType_t ncclType(DType t) {
  switch (t) {
    case DType::kF32: return ncclFloat32;
    case DType::kF16: return ncclFloat16;
    case DType::kBF16: return ncclBfloat16;
    case DType::kI32: return ncclInt32;
    case DType::kI64: return ncclInt64;
    case DType::kU8: return ncclUint8;
    default: throw NotSupported(fmt::format("nccl backend has no {} type", dtypeName(t)));
  }
}

ncclRedOp_t ncclOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return ncclSum;
    case ReduceOp::kAvg: return ncclAvg;
    case ReduceOp::kMax: return ncclMax;
    case ReduceOp::kMin: return ncclMin;
  }
  return ncclSum;
}

class NcclBackend final : public Backend {
 public:
  NcclBackend(ncclComm_t comm, int device) : comm_(comm), device_(device) {
    cudaCheck(cudaSetDevice(device_), "cudaSetDevice");
    cudaCheck(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    cudaCheck(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming), "cudaEventCreate");
    ncclCheck(ncclCommUserRank(comm_, &rank_), "ncclCommUserRank");
    ncclCheck(ncclCommCount(comm_, &size_), "ncclCommCount");
  }

  ~NcclBackend() override {
    if (stream_) cudaStreamSynchronize(stream_);
    if (!aborted_->load()) ncclCommDestroy(comm_);
    if (stream_) cudaStreamDestroy(stream_);
    if (ready_) cudaEventDestroy(ready_);
    if (scratch_) cudaFree(scratch_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }
  bool supports(Device d) const override { return d == Device::kCuda; }

  WorkPtr allreduce(BufferView buf, ReduceOp op) override {
    onDevice("allreduce", buf);
    afterCaller();
    ncclCheck(ncclAllReduce(buf.data, buf.data, buf.count, ncclType(buf.dtype), ncclOp(op), comm_,
                            stream_),
              "ncclAllReduce");
    return work("nccl allreduce");
  }

  WorkPtr reduceScatter(BufferView in, BufferView out, const std::vector<size_t>& counts,
                        ReduceOp op) override {
    onDevice("reduce_scatter", in);
    onDevice("reduce_scatter", out);
    afterCaller();
    auto t = ncclType(in.dtype);
    if (std::all_of(counts.begin(), counts.end(), [&](size_t c) { return c == counts[0]; })) {
      ncclCheck(ncclReduceScatter(in.data, out.data, counts[0], t, ncclOp(op), comm_, stream_),
                "ncclReduceScatter");
    } else {
      size_t esz = dtypeSize(in.dtype), off = 0;
      ncclCheck(ncclGroupStart(), "ncclGroupStart");
      for (int r = 0; r < size_; ++r) {
        const char* src = static_cast<const char*>(in.data) + off * esz;
        void* dst = r == rank_ ? out.data : const_cast<char*>(src);
        ncclCheck(ncclReduce(src, dst, counts[r], t, ncclOp(op), r, comm_, stream_),
                  "ncclReduce");
        off += counts[r];
      }
      ncclCheck(ncclGroupEnd(), "ncclGroupEnd");
    }
    return work("nccl reduce_scatter");
  }

  WorkPtr allgather(BufferView in, BufferView out, const std::vector<size_t>& counts) override {
    onDevice("allgather", in);
    onDevice("allgather", out);
    afterCaller();
    auto t = ncclType(in.dtype);
    if (std::all_of(counts.begin(), counts.end(), [&](size_t c) { return c == counts[0]; })) {
      ncclCheck(ncclAllGather(in.data, out.data, counts[0], t, comm_, stream_), "ncclAllGather");
    } else {
      size_t esz = dtypeSize(in.dtype), off = 0;
      ncclCheck(ncclGroupStart(), "ncclGroupStart");
      for (int r = 0; r < size_; ++r) {
        char* dst = static_cast<char*>(out.data) + off * esz;
        const void* src = r == rank_ ? in.data : dst;
        ncclCheck(ncclBroadcast(src, dst, counts[r], t, r, comm_, stream_), "ncclBroadcast");
        off += counts[r];
      }
      ncclCheck(ncclGroupEnd(), "ncclGroupEnd");
    }
    return work("nccl allgather");
  }

  WorkPtr broadcast(BufferView buf, int root) override {
    onDevice("broadcast", buf);
    afterCaller();
    ncclCheck(ncclBroadcast(buf.data, buf.data, buf.count, ncclType(buf.dtype), root, comm_,
                            stream_),
              "ncclBroadcast");
    return work("nccl broadcast");
  }

  WorkPtr reduce(BufferView buf, int root, ReduceOp op) override {
    onDevice("reduce", buf);
    afterCaller();
    ncclCheck(ncclReduce(buf.data, buf.data, buf.count, ncclType(buf.dtype), ncclOp(op), root,
                         comm_, stream_),
              "ncclReduce");
    return work("nccl reduce");
  }

  WorkPtr barrier() override {
    if (!scratch_) cudaCheck(cudaMalloc(&scratch_, sizeof(int)), "cudaMalloc");
    afterCaller();
    ncclCheck(ncclAllReduce(scratch_, scratch_, 1, ncclInt32, ncclSum, comm_, stream_),
              "ncclAllReduce (barrier)");
    return work("nccl barrier");
  }

  WorkPtr send(BufferView buf, int dst, int) override {
    onDevice("send", buf);
    afterCaller();
    ncclCheck(ncclSend(buf.data, buf.count, ncclType(buf.dtype), dst, comm_, stream_),
              "ncclSend");
    return work(fmt::format("nccl send to rank {}", dst));
  }

  WorkPtr recv(BufferView buf, int src, int) override {
    onDevice("recv", buf);
    afterCaller();
    ncclCheck(ncclRecv(buf.data, buf.count, ncclType(buf.dtype), src, comm_, stream_),
              "ncclRecv");
    return work(fmt::format("nccl recv from rank {}", src));
  }

  std::unique_ptr<Backend> newSubgroup(const std::vector<int>& ranks) override {
    auto it = std::find(ranks.begin(), ranks.end(), rank_);
    int color = it == ranks.end() ? NCCL_SPLIT_NOCOLOR : 0;
    ncclComm_t sub = nullptr;
    ncclCheck(ncclCommSplit(comm_, color, static_cast<int>(it - ranks.begin()), &sub, nullptr),
              "ncclCommSplit");
    if (!sub) return nullptr;
    return std::make_unique<NcclBackend>(sub, device_);
  }

 private:
  // Orders the next enqueue after everything already issued on the calling thread's current
  // stream (stream 0: the legacy default stream, or the per-thread one under
  // --default-stream per-thread): record an event there, make the group's stream wait on it.
  void afterCaller() {
    cudaCheck(cudaSetDevice(device_), "cudaSetDevice");
    cudaCheck(cudaEventRecord(ready_, 0), "cudaEventRecord (caller's stream)");
    cudaCheck(cudaStreamWaitEvent(stream_, ready_, 0), "cudaStreamWaitEvent");
  }
  void onDevice(const char* what, const BufferView& b) const {
    if (b.device != Device::kCuda) {
      throw NotSupported(fmt::format(
          "nccl {}: buffer is in host memory; nccl needs device buffers (use --comm_backend "
          "gloo for host tensors)",
          what));
    }
  }
  WorkPtr work(std::string what) {
    return std::make_shared<NcclWork>(std::move(what), stream_, comm_, aborted_);
  }

  ncclComm_t comm_;
  int device_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t ready_ = nullptr;  // recorded on the caller's stream before each enqueue
  int rank_ = 0, size_ = 1;
  void* scratch_ = nullptr;
  std::string name_ = "nccl";
  std::shared_ptr<std::atomic<bool>> aborted_ = std::make_shared<std::atomic<bool>>(false);
};

}  // namespace

int cudaDeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}

std::unique_ptr<Backend> createNcclBackend(std::shared_ptr<Store> store, int rank, int size,
                                           const GroupOptions& opts) {
  int devices = cudaDeviceCount();
  if (devices == 0) {
    throw ConfigError("comm backend 'nccl' needs a CUDA device and none is visible; use "
                      "--comm_backend gloo");
  }
  const char* lr = std::getenv("LOCAL_RANK");
  int device = (lr ? std::atoi(lr) : rank) % devices;
  cudaCheck(cudaSetDevice(device), "cudaSetDevice");
  auto timeout = opts.timeout.count() > 0 ? opts.timeout : defaultTimeout();
  ncclUniqueId id;
  if (rank == 0) {
    ncclCheck(ncclGetUniqueId(&id), "ncclGetUniqueId");
    store->set("nccl/uid", Bytes(reinterpret_cast<uint8_t*>(&id),
                                 reinterpret_cast<uint8_t*>(&id) + sizeof(id)));
  } else {
    Bytes b = store->get("nccl/uid", timeout);
    if (b.size() != sizeof(id)) {
      throw CommError(fmt::format("nccl: unique id from rank 0 has {} bytes, expected {}",
                                  b.size(), sizeof(id)));
    }
    std::copy(b.begin(), b.end(), reinterpret_cast<uint8_t*>(&id));
  }
  ncclComm_t comm = nullptr;
  ncclCheck(ncclCommInitRank(&comm, size, id, rank), "ncclCommInitRank");
  return std::make_unique<NcclBackend>(comm, device);
}

}  // namespace ds::comm
