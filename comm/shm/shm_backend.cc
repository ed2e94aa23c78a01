// ShmBackend: the decorator of shm_backend.h, and the connection protocol under the group's
// store prefix "shm/<generation>" (subgroups: "<parent>/sub<k>"): "host/<r>" = host key of each
// rank; "segment" = "ok <name>" or "error <text>" from group rank 0, the creator.
#include "comm/shm/shm_backend.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <fstream>
#include <set>

#include "comm/comm_knobs.h"
#include "comm/serial_worker.h"
#include "comm/shm/hier_backend.h"
#include "comm/shm/shm_collectives.h"
#include "comm/shm/shm_link.h"
#include "comm/store/prefix_store.h"
#include "core/core_knobs.h"
#include "core/env.h"
#include "core/error.h"
#include "core/log.h"

namespace ds::comm {
namespace {

using shm_impl::ShmLink;
using shm_impl::ShmSegment;

std::string text(const Bytes& b) { return std::string(b.begin(), b.end()); }
Bytes bytes(const std::string& s) { return Bytes(s.begin(), s.end()); }

class ShmBackend final : public Backend {
 public:
  ShmBackend(std::unique_ptr<Backend> inner, std::unique_ptr<ShmLink> link,
             std::shared_ptr<Store> store, std::string prefix, ShmOptions options,
             std::vector<int> globalRanks)
      : inner_(std::move(inner)),
        link_(std::move(link)),
        store_(std::move(store)),
        prefix_(std::move(prefix)),
        options_(options),
        globalRanks_(std::move(globalRanks)),
        worker_(std::make_unique<SerialWorker>(options_.timeout)) {}

  ~ShmBackend() override {
    worker_.reset();  // runs what is queued; a member that already left fails it at once
    link_.reset();    // closes this endpoint
  }

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  const std::string& name() const override { return inner_->name(); }
  bool supports(Device d) const override { return inner_->supports(d); }

  WorkPtr allreduce(BufferView buf, ReduceOp op) override {
    if (!onShm(buf, true))
      return viaInner("allreduce", buf, [this, buf, op] { return inner_->allreduce(buf, op); });
    return run("allreduce", [this, buf, op] {
      shm_impl::allreduce(*link_, buf.data, buf.count, buf.dtype, op);
    });
  }

  WorkPtr reduceScatter(BufferView input, BufferView output, const std::vector<size_t>& counts,
                        ReduceOp op) override {
    if (!onShm(input, true) || counts.size() != static_cast<size_t>(size())) {
      return viaInner("reduce_scatter", input, [this, input, output, counts, op] {
        return inner_->reduceScatter(input, output, counts, op);
      });
    }
    return run("reduce_scatter", [this, input, output, counts, op] {
      shm_impl::reduceScatter(*link_, input.data, output.data, counts, input.dtype, op);
    });
  }

  WorkPtr allgather(BufferView input, BufferView output,
                    const std::vector<size_t>& counts) override {
    if (!onShm(output, false) || counts.size() != static_cast<size_t>(size())) {
      return viaInner("allgather", output, [this, input, output, counts] {
        return inner_->allgather(input, output, counts);
      });
    }
    return run("allgather", [this, input, output, counts] {
      shm_impl::allgather(*link_, input.data, output.data, counts, dtypeSize(input.dtype));
    });
  }

  WorkPtr broadcast(BufferView buf, int root) override {
    if (!onShm(buf, false) || root < 0 || root >= size())
      return viaInner("broadcast", buf, [this, buf, root] { return inner_->broadcast(buf, root); });
    return run("broadcast",
               [this, buf, root] { shm_impl::broadcast(*link_, buf.data, buf.bytes(), root); });
  }

  WorkPtr reduce(BufferView buf, int root, ReduceOp op) override {
    if (!onShm(buf, true) || root < 0 || root >= size()) {
      return viaInner("reduce", buf,
                      [this, buf, root, op] { return inner_->reduce(buf, root, op); });
    }
    return run("reduce", [this, buf, root, op] {
      shm_impl::reduce(*link_, buf.data, buf.count, buf.dtype, root, op);
    });
  }

  WorkPtr barrier() override {
    if (options_.minBytes > 0)
      return viaInner("barrier", BufferView{}, [this] { return inner_->barrier(); });
    return run("barrier", [this] { shm_impl::barrier(*link_); });
  }

  WorkPtr send(BufferView buf, int dst, int tag) override { return inner_->send(buf, dst, tag); }
  WorkPtr recv(BufferView buf, int src, int tag) override { return inner_->recv(buf, src, tag); }

  std::unique_ptr<Backend> newSubgroup(const std::vector<int>& ranks) override {
    std::string prefix = fmt::format("{}/sub{}", prefix_, subgroups_++);
    worker_->drain(options_.timeout);  // the inner split after every collective before it
    auto sub = inner_->newSubgroup(ranks);
    if (!sub) return nullptr;
    std::vector<int> global;
    for (int r : ranks) global.push_back(globalRanks_[static_cast<size_t>(r)]);
    return connectShm(std::move(sub), store_, prefix, options_, std::move(global));
  }

  bool singleCopy() const { return link_->cmaFor(SIZE_MAX); }
  size_t peerRegionsMapped() const { return link_->peerRegionsMapped(); }

  // An allreduce maps this rank's slice of every peer's buffer (shm_single_copy.cc).
  size_t mappedPeerBytes(size_t bufferBytes) const override {
    if (!link_->mapPeers() || !(link_->cmaFor(bufferBytes) || link_->mapOnlyFor(bufferBytes)))
      return 0;
    const size_t n = static_cast<size_t>(size()), page = 4096;
    const size_t slice = (bufferBytes + n - 1) / n;
    return (n - 1) * ((slice + page - 1) / page + 1) * page;
  }

  // The protocol of wrapWithShm, for a group under `prefix`.
  static std::unique_ptr<Backend> connectShm(std::unique_ptr<Backend> inner,
                                             std::shared_ptr<Store> root, const std::string& prefix,
                                             const ShmOptions& options, std::vector<int> global);

 private:
  // The shm path takes host buffers of the dtypes it handles (reduce: those it can reduce), of
  // at least options_.minBytes (the buffer given: the input of reduce_scatter, the output of
  // allgather).
  bool onShm(const BufferView& b, bool reduces) const {
    if (b.device != Device::kCpu || b.bytes() < options_.minBytes) return false;
    return !reduces || shm_impl::reducible(b.dtype);
  }

  WorkPtr run(const char* what, std::function<void()> fn) {
    return worker_->submit(fmt::format("shm {} (rank {} of {})", what, rank(), size()),
                           std::move(fn));
  }

  // A host-buffer collective the inner backend runs (below minBytes, a dtype the shm path does
  // not reduce, counts it does not take) is issued from this layer's worker, after the shm
  // collectives queued before it, so that the group keeps issue order across both transports: a
  // wait on a later collective means the earlier ones are done, whichever transport ran them,
  // and the inner backend sees its collectives in the same order on every rank (a subgroup split
  // drains the queue first). Device buffers go to the inner backend at once (it stages them
  // itself; its Work may carry a device event that a task would hide).
  WorkPtr viaInner(const char* what, const BufferView& b, std::function<WorkPtr()> call) {
    if (b.device != Device::kCpu) return call();
    return worker_->submitIssue(
        fmt::format("{} {} (rank {} of {}, after the queued shm collectives)", inner_->name(), what,
                    rank(), size()),
        std::move(call), options_.timeout);
  }

  std::unique_ptr<Backend> inner_;
  std::unique_ptr<ShmLink> link_;
  std::shared_ptr<Store> store_;
  std::string prefix_;
  ShmOptions options_;
  std::vector<int> globalRanks_;
  int subgroups_ = 0;
  std::unique_ptr<SerialWorker> worker_;
};

// Every member's host key, indexed by group rank.
std::vector<std::string> hostKeys(Store& store, int rank, int size,
                                  std::chrono::milliseconds timeout) {
  std::string mine = shmHostKey();
  store.set(fmt::format("host/{}", rank), bytes(mine));
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back(fmt::format("host/{}", r));
  try {
    store.wait(keys, timeout);
  } catch (const TimeoutError& e) {
    throw TimeoutError(
        fmt::format("shared memory: group rank {} of {} waited {:.1f} s for the "
                    "others' host keys: {}",
                    rank, size, std::chrono::duration<double>(timeout).count(), e.what()));
  }
  std::vector<std::string> out;
  for (const auto& k : keys) out.push_back(text(store.get(k, timeout)));
  return out;
}

// Group rank 0 creates the segment and publishes its name (or why it could not); the others
// open it.
ShmSegment createOrOpen(Store& store, int rank, size_t segBytes, int size, size_t slotBytes,
                        std::chrono::milliseconds timeout) {
  if (rank == 0) {
    try {
      ShmSegment seg = ShmSegment::create(shm_impl::nextSegmentName(), segBytes);
      ShmLink::initHeader(seg.data(), size, slotBytes);
      store.set("segment", bytes("ok " + seg.name()));
      return seg;
    } catch (const std::exception& e) {
      store.set("segment", bytes(std::string("error ") + e.what()));
      throw;
    }
  }
  try {
    store.wait({"segment"}, timeout);
  } catch (const TimeoutError&) {
    throw TimeoutError(fmt::format(
        "shared memory: group rank {} waited {:.1f} s for group rank 0 to create the segment "
        "[DS_TIMEOUT]",
        rank, std::chrono::duration<double>(timeout).count()));
  }
  std::string got = text(store.get("segment", timeout));
  if (got.rfind("error ", 0) == 0) {
    throw CommError(
        fmt::format("shared memory: group rank 0 could not create the segment: {}", got.substr(6)),
        -1);
  }
  try {
    return ShmSegment::open(got.substr(3), segBytes);
  } catch (const std::exception& e) {
    // The others wait for every member to map the segment: tell them at once.
    store.set("failed",
              bytes(fmt::format("group rank {} could not open the segment: {}", rank, e.what())));
    throw;
  }
}

// The single-copy choice (the same on every member): logged by group rank 0, at INFO for the
// first group of this process, DEBUG for later ones (subgroups).
void logCmaChoice(int rank, const std::string& cmaOff, const std::string& mapOff,
                  const ShmLink& link) {
  static std::atomic<bool> logged{false};
  if (rank != 0) return;
  const std::string maps = mapOff.empty()
                               ? std::string("registered buffers used in place through a mapping")
                               : fmt::format("no peer mappings ({})", mapOff);
  std::string line =
      cmaOff.empty()
          ? fmt::format("shm: single-copy (CMA) on, >= {} bytes, reduced in {}-byte chunks; {}",
                        link.cmaMinBytes(), link.cmaChunkBytes(), maps)
      : mapOff.empty()
          ? fmt::format(
                "shm: CMA unavailable ({}); single copy only where every rank's buffer is "
                "registered, >= {} bytes, {}; copy path otherwise",
                cmaOff, link.cmaMinBytes(), maps)
          : fmt::format("shm: CMA unavailable ({}), {}, copy path", cmaOff, maps);
  if (logged.exchange(true)) {
    DS_LOG_DEBUG("comm", "{}", line);
  } else {
    DS_LOG_INFO("comm", "{}", line);
  }
}

}  // namespace

std::unique_ptr<Backend> ShmBackend::connectShm(std::unique_ptr<Backend> inner,
                                                std::shared_ptr<Store> root,
                                                const std::string& prefix,
                                                const ShmOptions& options,
                                                std::vector<int> global) {
  const int rank = inner->rank(), size = inner->size();
  if (size < 2) return inner;
  ShmOptions o = options;
  if (o.timeout.count() <= 0) o.timeout = defaultTimeout();
  o.slotBytes = std::max<size_t>(o.slotBytes / 4096 * 4096, 4096);
  PrefixStore store(prefix, root);
  const std::vector<std::string> keys = hostKeys(store, rank, size, o.timeout);
  if (std::any_of(keys.begin(), keys.end(), [&](const std::string& k) { return k != keys[0]; })) {
    const HostLayout layout = HostLayout::fromKeys(keys);
    if (hierEnabledByEnv() && o.minBytes == 0 && layout.worthHierarchy()) {
      return makeHierBackend(std::move(inner), std::move(root), prefix + "/hier", o, layout, global,
                             hierMinBytesFromEnv());
    }
    DS_LOG_DEBUG("comm", "shm: group {} spans hosts ({}); collectives stay on {}", prefix,
                 layout.describe(), inner->name());
    return inner;
  }
  if (o.slotBytes / 2 / static_cast<size_t>(size) / 8 == 0) {
    throw ConfigError(fmt::format("DS_COMM_SHM_SLOT_BYTES={} is too small for {} local ranks",
                                  o.slotBytes, size));
  }
  ShmSegment seg = createOrOpen(store, rank, shm_impl::segmentBytes(size, o.slotBytes), size,
                                o.slotBytes, o.timeout);
  auto link = std::make_unique<ShmLink>(std::move(seg), rank, size, o.slotBytes, o.timeout, global);
  link->awaitMapped([&store] {
    if (!store.check({"failed"})) return std::string();
    return text(store.get("failed", std::chrono::seconds(5)));
  });
  link->setCmaChunkBytes(shm_impl::cmaChunkBytes(o.cmaChunkBytes, size, shm_impl::l2CacheBytes()));
  const std::string cmaOff = link->agreeOnCma(o.cma, o.cmaMinBytes);
  logCmaChoice(rank, cmaOff, link->agreeOnMap(o.mapPeers), *link);
  return std::make_unique<ShmBackend>(std::move(inner), std::move(link), std::move(root), prefix, o,
                                      std::move(global));
}

std::unique_ptr<Backend> wrapGroupWithShm(std::unique_ptr<Backend> inner,
                                          std::shared_ptr<Store> root, const std::string& prefix,
                                          const ShmOptions& options, std::vector<int> globalRanks) {
  return ShmBackend::connectShm(std::move(inner), std::move(root), prefix, options,
                                std::move(globalRanks));
}

bool isShmBackend(const Backend& b) { return dynamic_cast<const ShmBackend*>(&b) != nullptr; }

bool isShmSingleCopy(const Backend& b) {
  const auto* shm = dynamic_cast<const ShmBackend*>(&b);
  return shm != nullptr && shm->singleCopy();
}

size_t shmPeerRegionsMapped(const Backend& b) {
  const auto* shm = dynamic_cast<const ShmBackend*>(&b);
  return shm != nullptr ? shm->peerRegionsMapped() : 0;
}

bool shmEnabledByEnv() { return knobBoolOrDefault(knobs::kCommShm); }

ShmOptions shmOptionsFromEnv(std::chrono::milliseconds timeout, const std::string& backend) {
  ShmOptions o;
  if (backend == "mpi") o.minBytes = static_cast<size_t>(knobIntOrDefault(knobs::kMpiShmMinBytes));
  o.slotBytes = static_cast<size_t>(knobIntOrDefault(knobs::kCommShmSlotBytes));
  o.cma = knobBoolOrDefault(knobs::kCommShmCma);
  o.cmaMinBytes = static_cast<size_t>(knobIntOrDefault(knobs::kCommShmCmaMinBytes));
  o.cmaChunkBytes = static_cast<size_t>(knobIntOrDefault(knobs::kCommShmCmaChunkBytes));
  o.mapPeers = knobBoolOrDefault(knobs::kCommShmMap);
  o.timeout = timeout;
  return o;
}

std::string shmHostKey() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string boot;
  std::getline(in, boot);
  struct stat st {};
  std::string shm = ::stat("/dev/shm", &st) == 0 ? fmt::format("{}:{}", st.st_dev, st.st_ino) : "";
  return fmt::format("{}|{}|{}|{}", knobIntOrDefault(knobs::kCrossRank), boot, shm, ::getuid());
}

std::unique_ptr<Backend> wrapWithShm(std::unique_ptr<Backend> inner, std::shared_ptr<Store> store,
                                     const ShmOptions& options) {
  DS_CHECK(inner != nullptr && store != nullptr, "wrapWithShm needs a backend and a store");
  const int size = inner->size();
  if (size < 2) return inner;
  // Generation: the n-th shm world group over this store (as gloo's "gloo/joined").
  int64_t joined = store->add("shm/joined", 1);
  std::string prefix = fmt::format("shm/{}", (joined - 1) / size);
  std::vector<int> global(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) global[static_cast<size_t>(r)] = r;
  return ShmBackend::connectShm(std::move(inner), std::move(store), prefix, options,
                                std::move(global));
}

}  // namespace ds::comm
