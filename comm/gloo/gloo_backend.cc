// GlooBackend: a connected gloo group (GlooLink) plus its worker thread. Collectives are queued on
// the worker and run in issue order; point-to-point messages are posted at once from the issuing
// thread (so matching send/recv pairs never deadlock) and completed on the worker. Store layout:
// "gloo/<generation>" per world group (generation from an add() counter, so a re-created group
// never reads a stale address), "<parent>/sub<k>" per subgroup.
#include "comm/gloo/gloo_backend.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

#include "comm/gloo/collectives.h"
#include "comm/gloo/gloo_connect.h"
#include "comm/gloo/gloo_link.h"
#include "comm/gloo/reduce_kernels.h"
#include "comm/peer_process.h"
#include "comm/serial_worker.h"
#include "comm/store/prefix_store.h"
#include "core/env.h"
#include "core/error.h"

namespace ds::comm {
namespace {

using gloo_impl::GlooLink;
using gloo_impl::UBuf;

class GlooBackend final : public Backend {
 public:
  GlooBackend(std::shared_ptr<Store> root, std::string prefix, int rank, int size,
              std::chrono::milliseconds timeout, std::shared_ptr<::gloo::transport::Device> device,
              std::vector<int> globalRanks)
      : root_(std::move(root)),
        prefix_(std::move(prefix)),
        timeout_(timeout),
        device_(std::move(device)),
        globalRanks_(std::move(globalRanks)) {
    auto store = std::make_shared<PrefixStore>(prefix_, root_);
    auto ctx = gloo_impl::connectGroup(store, rank, size, device_, timeout_);
    link_ = std::make_unique<GlooLink>(std::move(ctx), store, timeout_, globalRanks_);
    groupStore_ = store;
    std::string id = localProcessId();
    groupStore_->set(procKey(rank), Bytes(id.begin(), id.end()));
    worker_ = std::make_unique<SerialWorker>(timeout_);
    watchdog_ = std::thread([this] { watch(); });
  }

  ~GlooBackend() override {
    {
      std::lock_guard<std::mutex> lock(watchMu_);
      stopWatch_ = true;
    }
    watchCv_.notify_all();
    watchdog_.join();
    // Work still queued at teardown must not wait out the timeout on peers that are leaving.
    if (worker_->busy()) link_->closeConnections();
    worker_.reset();
  }

  int rank() const override { return link_->rank(); }
  int size() const override { return link_->size(); }
  const std::string& name() const override { return name_; }

  WorkPtr allreduce(BufferView buf, ReduceOp op) override {
    checkReducible("allreduce", buf.dtype);
    return run("allreduce", [this, buf, op] {
      size_t bytes = buf.count * dtypeSize(gloo_impl::workType(buf.dtype));
      if (bytes <= gloo_impl::pairAllreduceBytes() &&
          gloo_impl::allreducePair(*link_, buf.data, buf.count, buf.dtype, op)) {
        return;
      }
      if (bytes <= gloo_impl::smallAllreduceBytes()) {
        gloo_impl::allreduceDirect(*link_, buf.data, buf.count, buf.dtype, op);
      } else {
        gloo_impl::allreduceRing(*link_, buf.data, buf.count, buf.dtype, op);
      }
    });
  }

  WorkPtr reduceScatter(BufferView input, BufferView output, const std::vector<size_t>& counts,
                        ReduceOp op) override {
    checkReducible("reduce_scatter", input.dtype);
    return run("reduce_scatter", [this, input, output, counts, op] {
      gloo_impl::reduceScatterRing(*link_, input.data, output.data, counts, input.dtype, op);
    });
  }

  WorkPtr allgather(BufferView input, BufferView output,
                    const std::vector<size_t>& counts) override {
    return run("allgather", [this, input, output, counts] {
      gloo_impl::allgatherRing(*link_, input.data, output.data, counts, dtypeSize(input.dtype));
    });
  }

  WorkPtr broadcast(BufferView buf, int root) override {
    return run("broadcast", [this, buf, root] {
      gloo_impl::broadcastChain(*link_, buf.data, buf.bytes(), root);
    });
  }

  WorkPtr reduce(BufferView buf, int root, ReduceOp op) override {
    checkReducible("reduce", buf.dtype);
    return run("reduce", [this, buf, root, op] {
      gloo_impl::reduceToRoot(*link_, buf.data, buf.count, buf.dtype, root, op);
    });
  }

  WorkPtr barrier() override {
    return run("barrier", [this] { gloo_impl::barrierDissemination(*link_); });
  }

  WorkPtr send(BufferView buf, int dst, int tag) override { return p2p(buf, dst, tag, true); }
  WorkPtr recv(BufferView buf, int src, int tag) override { return p2p(buf, src, tag, false); }

  std::unique_ptr<Backend> newSubgroup(const std::vector<int>& ranks) override {
    std::string prefix = fmt::format("{}/sub{}", prefix_, subgroups_++);
    std::set<int> unique(ranks.begin(), ranks.end());
    if (unique.size() != ranks.size() || ranks.empty()) {
      throw ConfigError(fmt::format("newSubgroup: ranks must be distinct and non-empty (got {})",
                                    fmt::join(ranks, ",")));
    }
    auto it = std::find(ranks.begin(), ranks.end(), rank());
    if (it == ranks.end()) return nullptr;
    std::vector<int> global;
    for (int r : ranks) global.push_back(globalRanks_[r]);
    return std::make_unique<GlooBackend>(root_, prefix, static_cast<int>(it - ranks.begin()),
                                         static_cast<int>(ranks.size()), timeout_, device_,
                                         std::move(global));
  }

 private:
  void checkReducible(const char* what, DType t) const {
    if (!gloo_impl::isReduceNative(t) && !gloo_impl::isHalf(t)) {
      throw NotSupported(
          fmt::format("gloo {}: cannot reduce dtype {} (fp32, fp16, bf16, int32, "
                      "int64 are supported)",
                      what, dtypeName(t)));
    }
  }

  static std::string procKey(int groupRank) { return "proc/" + std::to_string(groupRank); }

  // A member on this host whose process is gone (see comm/peer_process.h), or -1. Members' process
  // ids are read from the store once, as they become available.
  int deadLocalPeer() {
    peerIds_.resize(static_cast<size_t>(size()));
    for (int r = 0; r < size(); ++r) {
      if (r == rank()) continue;
      std::string& id = peerIds_[static_cast<size_t>(r)];
      if (id.empty()) {
        try {
          if (!groupStore_->check({procKey(r)})) continue;
          Bytes b = groupStore_->get(procKey(r), std::chrono::seconds(5));
          id.assign(b.begin(), b.end());
        } catch (const std::exception&) {
          continue;
        }
      }
      if (processGone(id)) return r;
    }
    return -1;
  }

  // Backstop for the abort protocol: a collective running for more than a second polls the
  // store every 250 ms; once another member has recorded a failure, closing our connections makes
  // our own waits fail at once (and fail() then names the recorded culprit). It also records a
  // member on this host whose process is gone: libgloo does not wake a rank blocked sending to a
  // dead peer, nor one blocked on a live peer that is itself blocked on it.
  void watch() {
    std::unique_lock<std::mutex> lock(watchMu_);
    while (!watchCv_.wait_for(lock, std::chrono::milliseconds(250), [&] { return stopWatch_; })) {
      if (worker_->runningFor() < std::chrono::seconds(1)) continue;
      lock.unlock();
      bool abort = link_->abortRecorded();
      if (!abort) {
        int dead = deadLocalPeer();
        if (dead >= 0) {
          link_->recordAbort(dead, "its process on this host is gone");
          abort = true;
        }
      }
      if (abort) {
        link_->abortWaits();
        link_->closeConnections();
      }
      lock.lock();
      if (abort) return;
    }
  }

  WorkPtr run(const char* what, std::function<void()> fn) {
    return worker_->submit(fmt::format("gloo {} (rank {} of {})", what, rank(), size()),
                           [this, fn = std::move(fn)] {
                             link_->checkUsable();
                             fn();
                           });
  }

  WorkPtr p2p(BufferView buf, int peer, int tag, bool isSend) {
    const char* what = isSend ? "send" : "recv";
    auto ubuf = std::make_shared<UBuf>(link_->buffer(buf.data, std::max<size_t>(buf.bytes(), 1)));
    uint64_t slot = GlooLink::p2pSlot(tag);
    try {
      link_->checkUsable();
      if (isSend) {
        link_->send(*ubuf, peer, slot, 0, buf.bytes(), what);
      } else {
        link_->recv(*ubuf, peer, slot, 0, buf.bytes(), what);
      }
    } catch (...) {
      auto w = std::make_shared<Work>(fmt::format("gloo {} (rank {})", what, rank()));
      w->markFailed(std::current_exception());
      return w;
    }
    return worker_->submit(
        fmt::format("gloo {} {} rank {} tag {}", what, isSend ? "to" : "from", peer, tag),
        [this, ubuf, peer, isSend, what] {
          if (isSend) {
            link_->waitSend(*ubuf, peer, what);
          } else {
            link_->waitRecv(*ubuf, peer, what);
          }
        });
  }

  std::shared_ptr<Store> root_;
  std::string prefix_;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<::gloo::transport::Device> device_;
  std::vector<int> globalRanks_;
  std::string name_ = "gloo";
  int subgroups_ = 0;
  std::unique_ptr<GlooLink> link_;
  std::shared_ptr<Store> groupStore_;
  std::vector<std::string> peerIds_;  // by group rank; the watchdog thread's own
  std::unique_ptr<SerialWorker> worker_;
  std::mutex watchMu_;
  std::condition_variable watchCv_;
  bool stopWatch_ = false;
  std::thread watchdog_;
};

}  // namespace

std::unique_ptr<Backend> createGlooBackend(std::shared_ptr<Store> store, int rank, int size,
                                           const GroupOptions& opts) {
  if (size < 1 || rank < 0 || rank >= size) {
    throw ConfigError(fmt::format("gloo: rank {} is outside a world of {} ranks", rank, size));
  }
  DS_CHECK(store != nullptr, "gloo backend needs a store");
  auto timeout = opts.timeout.count() > 0 ? opts.timeout : defaultTimeout();
  // Generation: the n-th world group created over this store on every rank (all ranks of group
  // g add before any adds for g+1, since g's rendezvous needs them all).
  int64_t joined = store->add("gloo/joined", 1);
  std::string prefix = fmt::format("gloo/{}", (joined - 1) / size);
  std::vector<int> global(size);
  for (int r = 0; r < size; ++r) global[r] = r;
  return std::make_unique<GlooBackend>(store, prefix, rank, size, timeout,
                                       gloo_impl::createDevice(opts.hostAddr), std::move(global));
}

}  // namespace ds::comm
