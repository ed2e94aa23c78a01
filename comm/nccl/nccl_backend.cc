// NcclBackend: one ncclComm_t (NcclComm) and one non-blocking CUDA stream per group. Collectives
// are enqueued on the stream from the issuing thread (NCCL orders them per stream), each after the
// group's stream waits on an event recorded on the caller's current (default) stream, so the
// kernels and copies that produced the buffer finish first (a non-blocking stream does not
// synchronise with the legacy default stream by itself). Uneven reduce_scatter / allgather
// become grouped ncclReduce / ncclBroadcast calls, one per block. Subgroups use ncclCommSplit.
// fp16/bf16 sum/avg are widened into an fp32 staging buffer, reduced in fp32 and narrowed once
// (half_staging.h); fp16/bf16 max/min stay native (exact in 16 bit: the result is one of the
// inputs). Collectives on host buffers are staged through device copies (host_staging.h) and
// complete before they return. A PeerWatchdog (peer_liveness.h), shared by the world group and
// its subgroups, aborts a group whose member died while it has Work pending, naming that member.
// send/recv (device buffers only) are queued
// and enqueued together in one ncclGroup (NCCL runs ungrouped p2p in stream order, so a recv
// posted before its send would block it).
#include "comm/nccl/nccl_backend.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <stdexcept>
#include <thread>

#include <unistd.h>

#include "comm/nccl/half_staging.h"
#include "comm/nccl/host_staging.h"
#include "comm/nccl/nccl_check.h"
#include "comm/nccl/nccl_comm.h"
#include "comm/nccl/nccl_work.h"
#include "comm/nccl/peer_liveness.h"
#include "core/core_knobs.h"
#include "core/env.h"
#include "core/error.h"
#include "core/rank_env.h"

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

// Sum and avg of fp16/bf16 go through fp32 staging (when the kernels are built).
bool widened(DType t, ReduceOp op) {
  return (t == DType::kF16 || t == DType::kBF16) && (op == ReduceOp::kSum || op == ReduceOp::kAvg);
}

class NcclBackend final : public Backend {
 public:
  NcclBackend(ncclComm_t comm, int device, std::shared_ptr<PeerWatchdog> watchdog,
              std::vector<int> globalRanks, std::chrono::milliseconds timeout)
      : comm_(std::make_shared<NcclComm>(comm)),
        device_(device),
        watchdog_(std::move(watchdog)),
        globalRanks_(std::move(globalRanks)),
        timeout_(timeout) {
    cudaCheck(cudaSetDevice(device_), "cudaSetDevice");
    cudaCheck(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    cudaCheck(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming), "cudaEventCreate");
    ncclCheck(ncclCommUserRank(comm, &rank_), "ncclCommUserRank");
    ncclCheck(ncclCommCount(comm, &size_), "ncclCommCount");
    staging_ = std::make_unique<StagingBuffer>(stream_);
    hostStaging_ = std::make_unique<HostStaging>(device_);
    const auto& lo = watchdog_->options();
    grace_ = lo.peerTimeout + 3 * lo.beat;
    int me = globalRanks_[rank_];
    std::weak_ptr<NcclComm> weak = comm_;
    int dev = device_;
    // Both run on the watchdog thread, which makes this group's device current first (so that
    // polling events never creates a context on device 0).
    watch_ = watchdog_->watch(
        globalRanks_,
        [weak, dev] {
          auto c = weak.lock();
          if (!c) return false;
          cudaSetDevice(dev);
          return c->tryAnyPending();
        },
        [weak, me, dev](const PeerFailure& f) {
          if (auto c = weak.lock()) {
            cudaSetDevice(dev);
            c->abort(std::make_exception_ptr(
                CommError(fmt::format("nccl collective on rank {} failed: {}; communicator aborted",
                                      me, f.message),
                          f.rank)));
          }
        });
  }

  ~NcclBackend() override {
    flush();  // queued p2p calls are enqueued, never dropped
    flusher_.reset();
    // Let issued work finish (bounded; the watchdog still watches, so a dead peer ends it by
    // aborting), then stop watching and abort what is left rather than wait on it.
    auto deadline = std::chrono::steady_clock::now() + timeout_;
    while (comm_->anyPending() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    watch_.reset();
    if (comm_->anyPending()) {
      comm_->abort(std::make_exception_ptr(CommError(
          fmt::format("nccl group of rank {} destroyed with work still pending after {} ms", rank_,
                      timeout_.count()))));
    }
    cudaSetDevice(device_);
    staging_.reset();
    hostStaging_.reset();
    {
      std::lock_guard<std::mutex> lock(comm_->mu());
      if (!comm_->aborted()) cudaStreamSynchronize(stream_);
    }
    comm_.reset();  // ncclCommDestroy unless aborted
    if (scratch_) cudaFree(scratch_);
    if (ready_) cudaEventDestroy(ready_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }
  bool supports(Device d) const override { return d == Device::kCuda; }

  WorkPtr allreduce(BufferView buf, ReduceOp op) override {
    if (anyOnHost({buf}))
      return hostStaging_->run("allreduce", {buf}, {true}, {true},
                               [&](const auto& d) { return allreduce(d[0], op); });
    return issue("nccl allreduce", [&](ncclComm_t c) {
      if (widened(buf.dtype, op)) {
        float* s = stage(buf.dtype, op, buf.count);
        launchWiden(buf.data, s, buf.count, buf.dtype == DType::kBF16, stream_);
        ncclCheck(ncclAllReduce(s, s, buf.count, ncclFloat32, ncclSum, c, stream_),
                  "ncclAllReduce (fp32 staging)");
        narrow(s, buf.data, buf.count, buf.dtype, op);
        return;
      }
      ncclCheck(
          ncclAllReduce(buf.data, buf.data, buf.count, ncclType(buf.dtype), ncclOp(op), c, stream_),
          "ncclAllReduce");
    });
  }

  WorkPtr reduceScatter(BufferView in, BufferView out, const std::vector<size_t>& counts,
                        ReduceOp op) override {
    if (anyOnHost({in, out}))
      return hostStaging_->run(
          "reduce_scatter", {in, out}, {true, false}, {false, true},
          [&](const auto& d) { return reduceScatter(d[0], d[1], counts, op); });
    return issue("nccl reduce_scatter", [&](ncclComm_t c) {
      bool even =
          std::all_of(counts.begin(), counts.end(), [&](size_t n) { return n == counts[0]; });
      size_t total = std::accumulate(counts.begin(), counts.end(), size_t{0});
      const void* src = in.data;
      void* dst = out.data;
      size_t esz = dtypeSize(in.dtype);
      auto t = ncclType(in.dtype);
      auto nop = ncclOp(op);
      float* s = nullptr;
      if (widened(in.dtype, op)) {
        s = stage(in.dtype, op, total + counts[rank_]);
        launchWiden(in.data, s, total, in.dtype == DType::kBF16, stream_);
        src = s;
        dst = s + total;
        esz = sizeof(float);
        t = ncclFloat32;
        nop = ncclSum;
      }
      if (even) {
        ncclCheck(ncclReduceScatter(src, dst, counts[0], t, nop, c, stream_), "ncclReduceScatter");
      } else {
        size_t off = 0;
        ncclCheck(ncclGroupStart(), "ncclGroupStart");
        for (int r = 0; r < size_; ++r) {
          const char* block = static_cast<const char*>(src) + off * esz;
          // recvbuff is only written on the root; elsewhere any valid pointer will do.
          void* to = r == rank_ ? dst : const_cast<char*>(block);
          ncclCheck(ncclReduce(block, to, counts[r], t, nop, r, c, stream_), "ncclReduce");
          off += counts[r];
        }
        ncclCheck(ncclGroupEnd(), "ncclGroupEnd");
      }
      if (s) narrow(s + total, out.data, counts[rank_], in.dtype, op);
    });
  }

  WorkPtr allgather(BufferView in, BufferView out, const std::vector<size_t>& counts) override {
    if (anyOnHost({in, out}))
      return hostStaging_->run("allgather", {in, out}, {true, false}, {false, true},
                               [&](const auto& d) { return allgather(d[0], d[1], counts); });
    return issue("nccl allgather", [&](ncclComm_t c) {
      auto t = ncclType(in.dtype);
      if (std::all_of(counts.begin(), counts.end(), [&](size_t n) { return n == counts[0]; })) {
        ncclCheck(ncclAllGather(in.data, out.data, counts[0], t, c, stream_), "ncclAllGather");
        return;
      }
      size_t esz = dtypeSize(in.dtype), off = 0;
      ncclCheck(ncclGroupStart(), "ncclGroupStart");
      for (int r = 0; r < size_; ++r) {
        char* dst = static_cast<char*>(out.data) + off * esz;
        const void* src = r == rank_ ? in.data : dst;
        ncclCheck(ncclBroadcast(src, dst, counts[r], t, r, c, stream_), "ncclBroadcast");
        off += counts[r];
      }
      ncclCheck(ncclGroupEnd(), "ncclGroupEnd");
    });
  }

  WorkPtr broadcast(BufferView buf, int root) override {
    if (anyOnHost({buf}))
      return hostStaging_->run("broadcast", {buf}, {rank_ == root}, {true},
                               [&](const auto& d) { return broadcast(d[0], root); });
    return issue("nccl broadcast", [&](ncclComm_t c) {
      ncclCheck(ncclBroadcast(buf.data, buf.data, buf.count, ncclType(buf.dtype), root, c, stream_),
                "ncclBroadcast");
    });
  }

  WorkPtr reduce(BufferView buf, int root, ReduceOp op) override {
    if (anyOnHost({buf}))
      return hostStaging_->run("reduce", {buf}, {true}, {rank_ == root},
                               [&](const auto& d) { return reduce(d[0], root, op); });
    return issue("nccl reduce", [&](ncclComm_t c) {
      if (widened(buf.dtype, op)) {
        float* s = stage(buf.dtype, op, buf.count);
        launchWiden(buf.data, s, buf.count, buf.dtype == DType::kBF16, stream_);
        ncclCheck(ncclReduce(s, s, buf.count, ncclFloat32, ncclSum, root, c, stream_),
                  "ncclReduce (fp32 staging)");
        if (rank_ == root) narrow(s, buf.data, buf.count, buf.dtype, op);
        return;
      }
      ncclCheck(ncclReduce(buf.data, buf.data, buf.count, ncclType(buf.dtype), ncclOp(op), root, c,
                           stream_),
                "ncclReduce");
    });
  }

  WorkPtr barrier() override {
    if (!scratch_) cudaCheck(cudaMalloc(&scratch_, sizeof(int)), "cudaMalloc");
    return issue("nccl barrier", [&](ncclComm_t c) {
      ncclCheck(ncclAllReduce(scratch_, scratch_, 1, ncclInt32, ncclSum, c, stream_),
                "ncclAllReduce (barrier)");
    });
  }

  WorkPtr send(BufferView buf, int dst, int) override { return queueP2P(true, buf, dst); }
  WorkPtr recv(BufferView buf, int src, int) override { return queueP2P(false, buf, src); }

  std::unique_ptr<Backend> newSubgroup(const std::vector<int>& ranks) override {
    auto it = std::find(ranks.begin(), ranks.end(), rank_);
    int color = it == ranks.end() ? NCCL_SPLIT_NOCOLOR : 0;
    ncclComm_t sub = nullptr;
    {
      std::lock_guard<std::mutex> lock(comm_->mu());
      if (comm_->aborted()) std::rethrow_exception(comm_->reason());
      flushLocked();
      ncclCheck(
          ncclCommSplit(comm_->get(), color, static_cast<int>(it - ranks.begin()), &sub, nullptr),
          "ncclCommSplit");
    }
    if (!sub) return nullptr;
    std::vector<int> global;
    for (int r : ranks) global.push_back(globalRanks_[r]);
    return std::make_unique<NcclBackend>(sub, device_, watchdog_, std::move(global), timeout_);
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
          "nccl {}: buffer is in host memory; nccl point-to-point needs device buffers (use "
          "--comm_backend gloo for host tensors)",
          what));
    }
  }
  // The fp32 staging buffer for a widened reduction of n elements.
  float* stage(DType t, ReduceOp op, size_t n) {
#if DS_NCCL_HALF_STAGING
    (void)t;
    (void)op;
    try {
      return staging_->get(n);
    } catch (const std::runtime_error& e) {
      throw CommError(fmt::format("nccl: {}", e.what()));
    }
#else
    (void)n;
    throw NotSupported(fmt::format(
        "nccl: {} {} needs fp32 accumulation, and this build has no CUDA compiler for its "
        "kernels (rebuild with nvcc on PATH)",
        dtypeName(t), reduceOpName(op)));
#endif
  }
  void narrow(const float* s, void* dst, size_t n, DType t, ReduceOp op) {
    launchNarrow(s, dst, n, t == DType::kBF16,
                 op == ReduceOp::kAvg ? static_cast<float>(size_) : 1.0f, stream_);
  }
  // Enqueues under the communicator's lock (NCCL: one thread at a time on a communicator; the
  // watchdog may abort it concurrently) and returns the Work; a group already broken returns a
  // failed Work carrying the reason.
  WorkPtr issue(std::string what, const std::function<void(ncclComm_t)>& enqueue) {
    std::lock_guard<std::mutex> lock(comm_->mu());
    if (comm_->aborted()) {
      auto w = std::make_shared<Work>(std::move(what));
      w->markFailed(comm_->reason());
      return w;
    }
    flushLocked();  // queued p2p calls come first, as issued
    afterCaller();
    try {
      enqueue(comm_->get());
    } catch (const std::runtime_error& e) {
      if (dynamic_cast<const Error*>(&e)) throw;
      throw CommError(fmt::format("{}: {}", what, e.what()));  // a kernel launch failure
    }
    auto w = std::make_shared<NcclWork>(std::move(what), stream_, comm_, grace_);
    comm_->track(w);
    return w;
  }

  // Queues a send/recv (see NcclDeferredWork): ordered after the caller's stream now, enqueued
  // with the other queued p2p calls as one NCCL group at the first wait or the next collective.
  WorkPtr queueP2P(bool isSend, BufferView buf, int peer) {
    onDevice(isSend ? "send" : "recv", buf);
    std::string what = fmt::format("nccl {} rank {}", isSend ? "send to" : "recv from", peer);
    std::lock_guard<std::mutex> lock(comm_->mu());
    if (comm_->aborted()) {
      auto w = std::make_shared<Work>(std::move(what));
      w->markFailed(comm_->reason());
      return w;
    }
    ncclType(buf.dtype);  // refuse an unsupported dtype now, not at the flush
    afterCaller();
    auto w = std::make_shared<NcclDeferredWork>(std::move(what), flusher_);
    p2p_.push_back(P2POp{isSend, buf, peer, w});
    return w;
  }

  void flush() {
    std::lock_guard<std::mutex> lock(comm_->mu());
    flushLocked();
  }

  // With the comm's lock held: enqueues the queued p2p calls as one group and binds their Works.
  void flushLocked() {
    if (p2p_.empty()) return;
    std::vector<P2POp> ops;
    ops.swap(p2p_);
    WorkPtr real;
    if (comm_->aborted()) {
      real = std::make_shared<Work>("nccl send/recv group");
      real->markFailed(comm_->reason());
    } else {
      try {
        cudaCheck(cudaSetDevice(device_), "cudaSetDevice");
        ncclCheck(ncclGroupStart(), "ncclGroupStart");
        for (auto& op : ops) {
          auto t = ncclType(op.buf.dtype);
          if (op.isSend) {
            ncclCheck(ncclSend(op.buf.data, op.buf.count, t, op.peer, comm_->get(), stream_),
                      "ncclSend");
          } else {
            ncclCheck(ncclRecv(op.buf.data, op.buf.count, t, op.peer, comm_->get(), stream_),
                      "ncclRecv");
          }
        }
        ncclCheck(ncclGroupEnd(), "ncclGroupEnd");
        auto w = std::make_shared<NcclWork>(
            fmt::format("nccl send/recv group of {} call(s) on rank {}", ops.size(), rank_),
            stream_, comm_, grace_);
        comm_->track(w);
        real = w;
      } catch (...) {
        real = std::make_shared<Work>("nccl send/recv group");
        real->markFailed(std::current_exception());
      }
    }
    for (auto& op : ops) op.work->bind(real);
  }

  struct P2POp {
    bool isSend;
    BufferView buf;
    int peer;
    std::shared_ptr<NcclDeferredWork> work;
  };
  std::vector<P2POp> p2p_;  // under comm_->mu()
  std::shared_ptr<std::function<void()>> flusher_ =
      std::make_shared<std::function<void()>>([this] { flush(); });

  std::shared_ptr<NcclComm> comm_;
  int device_;
  std::shared_ptr<PeerWatchdog> watchdog_;
  std::vector<int> globalRanks_;  // group rank -> world rank
  std::chrono::milliseconds timeout_;
  std::chrono::milliseconds grace_{0};
  std::unique_ptr<PeerWatchdog::Registration> watch_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t ready_ = nullptr;  // recorded on the caller's stream before each enqueue
  std::unique_ptr<StagingBuffer> staging_;
  std::unique_ptr<HostStaging> hostStaging_;  // collectives on host buffers
  int rank_ = 0, size_ = 1;
  void* scratch_ = nullptr;
  std::string name_ = "nccl";
};

}  // namespace

int cudaDeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

namespace {

std::string hostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "?";
  return buf;
}

// The group's device: LOCAL_RANK (checked by the knob registry: digits, in range; the global
// rank when unset) modulo the visible devices, made current; more local ranks than devices is
// refused (checkOneRankPerDevice). Errors name the rank, the host,
// LOCAL_RANK, the visible count and CUDA_VISIBLE_DEVICES (which decides what is visible).
int useRankDevice(int rank) {
  auto localRank = knobInt(knobs::kLocalRank);
  std::string who = fmt::format("rank {} on {} (LOCAL_RANK={})", rank, hostName(),
                                localRank ? std::to_string(*localRank) : "unset");
  int n = 0;
  if (cudaError_t rc = cudaGetDeviceCount(&n); rc != cudaSuccess || n == 0) {
    cudaGetLastError();
    throw ConfigError(fmt::format(
        "comm backend 'nccl' needs a CUDA device and {} sees none ({}; CUDA_VISIBLE_DEVICES "
        "selects the visible ones); use --comm_backend gloo",
        who, rc != cudaSuccess ? cudaGetErrorString(rc) : "0 devices"));
  }
  checkOneRankPerDevice(deriveRankEnv(currentEnv()).localSize, n, who,
                        knobString(knobs::kCudaVisibleDevices).value_or(""));
  int device = static_cast<int>(localRank.value_or(rank) % n);
  if (cudaError_t rc = cudaSetDevice(device); rc != cudaSuccess) {
    cudaGetLastError();
    throw CommError(fmt::format(
        "nccl: {} cannot use cuda:{} (of {} visible device(s); CUDA_VISIBLE_DEVICES selects "
        "them): {}",
        who, device, n, cudaGetErrorString(rc)));
  }
  return device;
}

}  // namespace

void checkOneRankPerDevice(int localSize, int devices, const std::string& who,
                           const std::string& visible) {
  if (localSize <= devices) return;
  throw ConfigError(fmt::format(
      "comm backend 'nccl': {} is one of {} local ranks (LOCAL_SIZE) but sees {} CUDA device(s) "
      "(CUDA_VISIBLE_DEVICES={}); NCCL allows one rank per GPU on a host. Start at most {} "
      "rank(s) per node (dsrun --num_gpus {}), or use --comm_backend gloo with "
      "train.device_sharing: true to let ranks share a device",
      who, localSize, devices, visible.empty() ? "unset" : "'" + visible + "'", devices, devices));
}

std::unique_ptr<Backend> createNcclBackend(std::shared_ptr<Store> store, int rank, int size,
                                           const GroupOptions& opts) {
  int device = useRankDevice(rank);
  auto timeout = opts.timeout.count() > 0 ? opts.timeout : defaultTimeout();
  ncclUniqueId id;
  if (rank == 0) {
    ncclCheck(ncclGetUniqueId(&id), "ncclGetUniqueId");
    store->set("nccl/uid", Bytes(reinterpret_cast<uint8_t*>(&id),
                                 reinterpret_cast<uint8_t*>(&id) + sizeof(id)));
  } else {
    Bytes b = store->get("nccl/uid", timeout);
    if (b.size() != sizeof(id)) {
      throw CommError(fmt::format("nccl: unique id from rank 0 has {} bytes, expected {}", b.size(),
                                  sizeof(id)));
    }
    std::copy(b.begin(), b.end(), reinterpret_cast<uint8_t*>(&id));
  }
  // The first heartbeat is in the store before the communicator exists, so every member's
  // counter can be read once any collective is pending.
  auto watchdog = std::make_shared<PeerWatchdog>(store, rank, LivenessOptions::fromEnv());
  ncclComm_t comm = nullptr;
  if (ncclResult_t rc = ncclCommInitRank(&comm, size, id, rank); rc != ncclSuccess) {
    const char* last = ncclGetLastError(nullptr);
    throw CommError(
        fmt::format("nccl: rank {} on {} (cuda:{}) could not join the communicator of {} ranks: "
                    "ncclCommInitRank failed: {}{}",
                    rank, hostName(), device, size, ncclGetErrorString(rc),
                    last != nullptr && *last != 0 ? fmt::format(" ({})", last) : std::string()));
  }
  std::vector<int> world(size);
  std::iota(world.begin(), world.end(), 0);
  return std::make_unique<NcclBackend>(comm, device, std::move(watchdog), std::move(world),
                                       timeout);
}

}  // namespace ds::comm
