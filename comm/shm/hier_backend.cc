// HierBackend (see hier_backend.h).
#include "comm/shm/hier_backend.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>

#include "comm/comm_knobs.h"
#include "comm/gloo/reduce_kernels.h"
#include "comm/serial_worker.h"
#include "comm/shm/shm_collectives.h"
#include "core/core_knobs.h"
#include "core/error.h"
#include "core/log.h"

namespace ds::comm {

HostLayout HostLayout::fromKeys(const std::vector<std::string>& keys) {
  HostLayout l;
  std::map<std::string, int> index;
  for (size_t r = 0; r < keys.size(); ++r) {
    auto [it, fresh] = index.try_emplace(keys[r], static_cast<int>(l.hostRanks.size()));
    if (fresh) l.hostRanks.emplace_back();
    l.hostRanks[static_cast<size_t>(it->second)].push_back(static_cast<int>(r));
    l.hostOf.push_back(it->second);
  }
  return l;
}

bool HostLayout::contiguous() const {
  for (const auto& ranks : hostRanks)
    if (ranks.back() - ranks.front() + 1 != static_cast<int>(ranks.size())) return false;
  return true;
}

bool HostLayout::worthHierarchy() const {
  if (hosts() < 2) return false;
  return std::any_of(hostRanks.begin(), hostRanks.end(),
                     [](const std::vector<int>& r) { return r.size() > 1; });
}

std::string HostLayout::describe() const {
  std::string s = fmt::format("{} hosts:", hosts());
  for (const auto& r : hostRanks) s += fmt::format(" [{}]", fmt::join(r, ","));
  return s;
}

bool hierEnabledByEnv() { return knobBoolOrDefault(knobs::kCommHierarchical); }

size_t hierMinBytesFromEnv() {
  return static_cast<size_t>(knobIntOrDefault(knobs::kCommHierMinBytes));
}

namespace {

// Elements in blocks [first, last].
size_t sumCounts(const std::vector<size_t>& counts, size_t first, size_t last) {
  size_t s = 0;
  for (size_t i = first; i <= last; ++i) s += counts[i];
  return s;
}

BufferView sub(const BufferView& b, size_t offset, size_t count) {
  return {static_cast<char*>(b.data) + offset * dtypeSize(b.dtype), count, b.dtype, b.device};
}

// Each host's share of per-rank block counts (hosts hold consecutive ranks).
std::vector<size_t> perHostCounts(const HostLayout& layout, const std::vector<size_t>& counts) {
  std::vector<size_t> out;
  for (const auto& ranks : layout.hostRanks)
    out.push_back(
        sumCounts(counts, static_cast<size_t>(ranks.front()), static_cast<size_t>(ranks.back())));
  return out;
}

class HierBackend final : public Backend {
 public:
  HierBackend(std::unique_ptr<Backend> flat, std::unique_ptr<Backend> local,
              std::unique_ptr<Backend> leaders, HostLayout layout, std::shared_ptr<Store> root,
              std::string prefix, ShmOptions shm, std::vector<int> globalRanks, size_t minBytes)
      : flat_(std::move(flat)),
        local_(std::move(local)),
        leaders_(std::move(leaders)),
        layout_(std::move(layout)),
        root_(std::move(root)),
        prefix_(std::move(prefix)),
        shm_(shm),
        globalRanks_(std::move(globalRanks)),
        minBytes_(minBytes),
        timeout_(shm.timeout),
        myHost_(layout_.hostOf[static_cast<size_t>(flat_->rank())]),
        worker_(std::make_unique<SerialWorker>(timeout_)) {}

  ~HierBackend() override { worker_.reset(); }

  int rank() const override { return flat_->rank(); }
  int size() const override { return flat_->size(); }
  const std::string& name() const override { return flat_->name(); }
  bool supports(Device d) const override { return flat_->supports(d); }

  WorkPtr allreduce(BufferView buf, ReduceOp op) override {
    if (!onHier(buf, op))
      return viaFlat("allreduce", buf, [this, buf, op] { return flat_->allreduce(buf, op); });
    return run("allreduce", [this, buf, op] {
      const ReduceOp step = op == ReduceOp::kAvg ? ReduceOp::kSum : op;
      local_->reduce(buf, 0, step)->wait(timeout_);
      if (leaders_) leaders_->allreduce(buf, step)->wait(timeout_);
      local_->broadcast(buf, 0)->wait(timeout_);
      gloo_impl::finishAvg(buf.data, buf.count, buf.dtype, op, size());
    });
  }

  WorkPtr reduceScatter(BufferView input, BufferView output, const std::vector<size_t>& counts,
                        ReduceOp op) override {
    if (!onHier(input, op) || !layout_.contiguous() ||
        counts.size() != static_cast<size_t>(size())) {
      return viaFlat("reduce_scatter", input, [this, input, output, counts, op] {
        return flat_->reduceScatter(input, output, counts, op);
      });
    }
    return run("reduce_scatter", [this, input, output, counts, op] {
      const ReduceOp step = op == ReduceOp::kAvg ? ReduceOp::kSum : op;
      const size_t es = dtypeSize(input.dtype);
      std::vector<char> whole(input.count * es);
      if (input.count) std::memcpy(whole.data(), input.data, whole.size());
      BufferView w{whole.data(), input.count, input.dtype, Device::kCpu};
      local_->reduce(w, 0, step)->wait(timeout_);
      const auto& mine = layout_.hostRanks[static_cast<size_t>(myHost_)];
      const size_t first = static_cast<size_t>(mine.front());
      const size_t hostCount = sumCounts(counts, first, static_cast<size_t>(mine.back()));
      std::vector<char> block(hostCount * es);
      BufferView b{block.data(), hostCount, input.dtype, Device::kCpu};
      if (leaders_) {
        const std::vector<size_t> hostCounts = perHostCounts(layout_, counts);
        leaders_->reduceScatter(w, b, hostCounts, step)->wait(timeout_);
      }
      local_->broadcast(b, 0)->wait(timeout_);
      const size_t r = static_cast<size_t>(rank());
      const size_t within = r > first ? sumCounts(counts, first, r - 1) : 0;
      if (counts[r]) std::memcpy(output.data, block.data() + within * es, counts[r] * es);
      gloo_impl::finishAvg(output.data, counts[r], output.dtype, op, size());
    });
  }

  WorkPtr allgather(BufferView input, BufferView output,
                    const std::vector<size_t>& counts) override {
    if (!onHier(output, std::nullopt) || !layout_.contiguous() ||
        counts.size() != static_cast<size_t>(size())) {
      return viaFlat("allgather", output, [this, input, output, counts] {
        return flat_->allgather(input, output, counts);
      });
    }
    return run("allgather", [this, input, output, counts] {
      const auto& mine = layout_.hostRanks[static_cast<size_t>(myHost_)];
      const size_t first = static_cast<size_t>(mine.front()),
                   last = static_cast<size_t>(mine.back());
      const size_t hostOffset = first ? sumCounts(counts, 0, first - 1) : 0;
      const size_t hostCount = sumCounts(counts, first, last);
      std::vector<size_t> localCounts(counts.begin() + static_cast<std::ptrdiff_t>(first),
                                      counts.begin() + static_cast<std::ptrdiff_t>(last) + 1);
      local_->allgather(input, sub(output, hostOffset, hostCount), localCounts)->wait(timeout_);
      if (leaders_) {
        // The leaders' input is their host block; a copy, as no backend promises in-place here.
        const size_t es = dtypeSize(output.dtype);
        std::vector<char> block(hostCount * es);
        if (hostCount)
          std::memcpy(block.data(), static_cast<char*>(output.data) + hostOffset * es,
                      block.size());
        const std::vector<size_t> hostCounts = perHostCounts(layout_, counts);
        leaders_
            ->allgather({block.data(), hostCount, output.dtype, Device::kCpu}, output, hostCounts)
            ->wait(timeout_);
      }
      local_->broadcast(output, 0)->wait(timeout_);
    });
  }

  WorkPtr broadcast(BufferView buf, int root) override {
    if (!onHier(buf, std::nullopt) || root < 0 || root >= size())
      return viaFlat("broadcast", buf, [this, buf, root] { return flat_->broadcast(buf, root); });
    return run("broadcast", [this, buf, root] {
      const int rootHost = layout_.hostOf[static_cast<size_t>(root)];
      const auto& rootRanks = layout_.hostRanks[static_cast<size_t>(rootHost)];
      // 1. Within the root's host, from the root (its leader then holds the data).
      if (myHost_ == rootHost) {
        const int localRoot = static_cast<int>(std::find(rootRanks.begin(), rootRanks.end(), root) -
                                               rootRanks.begin());
        local_->broadcast(buf, localRoot)->wait(timeout_);
      }
      // 2. Among the leaders, from the root host's leader (leader index = host index).
      if (leaders_) leaders_->broadcast(buf, rootHost)->wait(timeout_);
      // 3. Within every other host, from its leader.
      if (myHost_ != rootHost) local_->broadcast(buf, 0)->wait(timeout_);
    });
  }

  WorkPtr reduce(BufferView buf, int root, ReduceOp op) override {
    return viaFlat("reduce", buf, [this, buf, root, op] { return flat_->reduce(buf, root, op); });
  }
  WorkPtr barrier() override {
    return viaFlat("barrier", BufferView{}, [this] { return flat_->barrier(); });
  }
  WorkPtr send(BufferView buf, int dst, int tag) override { return flat_->send(buf, dst, tag); }
  WorkPtr recv(BufferView buf, int src, int tag) override { return flat_->recv(buf, src, tag); }

  std::unique_ptr<Backend> newSubgroup(const std::vector<int>& ranks) override {
    std::string prefix = fmt::format("{}/sub{}", prefix_, subgroups_++);
    worker_->drain(timeout_);  // the flat split after every collective issued before it
    auto sub = flat_->newSubgroup(ranks);
    if (!sub) return nullptr;
    std::vector<int> global;
    for (int r : ranks) global.push_back(globalRanks_[static_cast<size_t>(r)]);
    return wrapGroupWithShm(std::move(sub), root_, prefix, shm_, std::move(global));
  }

 private:
  // Host buffers of at least minBytes_ in a dtype the kernels reduce (op given) or any dtype.
  bool onHier(const BufferView& b, std::optional<ReduceOp> op) const {
    if (b.device != Device::kCpu || b.bytes() < minBytes_) return false;
    if (!op) return true;
    if (!shm_impl::reducible(b.dtype)) return false;
    // avg = sum, then one division: the kernels divide fp32 and integers only.
    return *op != ReduceOp::kAvg || b.dtype == DType::kF32 || b.dtype == DType::kI32 ||
           b.dtype == DType::kI64;
  }

  WorkPtr run(const char* what, std::function<void()> fn) {
    return worker_->submit(fmt::format("hierarchical {} (rank {} of {}, {})", what, rank(), size(),
                                       layout_.describe()),
                           std::move(fn));
  }

  // A host-buffer collective left to the flat backend (below minBytes_, a layout or dtype the
  // hierarchy does not take, reduce, barrier) is issued from this layer's worker in its turn:
  // the group keeps one issue order across the hierarchical and the flat path, as ShmBackend
  // does over its inner backend. Device buffers go to the flat backend at once.
  WorkPtr viaFlat(const char* what, const BufferView& b, std::function<WorkPtr()> call) {
    if (b.device != Device::kCpu) return call();
    return worker_->submitIssue(fmt::format("{} {} (rank {} of {}, after the queued hierarchical "
                                            "collectives)",
                                            flat_->name(), what, rank(), size()),
                                std::move(call), timeout_);
  }

  std::unique_ptr<Backend> flat_;
  std::unique_ptr<Backend> local_;
  std::unique_ptr<Backend> leaders_;  // null on ranks that lead no host
  HostLayout layout_;
  std::shared_ptr<Store> root_;
  std::string prefix_;
  ShmOptions shm_;
  std::vector<int> globalRanks_;
  size_t minBytes_;
  std::chrono::milliseconds timeout_;
  int myHost_;
  int subgroups_ = 0;
  std::unique_ptr<SerialWorker> worker_;
};

}  // namespace

std::unique_ptr<Backend> makeHierBackend(std::unique_ptr<Backend> flat, std::shared_ptr<Store> root,
                                         const std::string& prefix, const ShmOptions& shm,
                                         const HostLayout& layout,
                                         const std::vector<int>& globalRanks, size_t minBytes) {
  // Every rank creates every subgroup, in the same order (the subgroup contract). Within a host
  // no peer buffer is mapped: the leader's broadcast would map its whole buffer into every other
  // local rank (a resident-set cost the memory model does not carry); CMA copies there.
  ShmOptions localOptions = shm;
  localOptions.mapPeers = false;
  std::unique_ptr<Backend> local;
  for (int h = 0; h < layout.hosts(); ++h) {
    const auto& ranks = layout.hostRanks[static_cast<size_t>(h)];
    auto group = flat->newSubgroup(ranks);
    if (!group) continue;
    std::vector<int> global;
    for (int r : ranks) global.push_back(globalRanks[static_cast<size_t>(r)]);
    local = wrapGroupWithShm(std::move(group), root, fmt::format("{}/host{}", prefix, h),
                             localOptions, std::move(global));
  }
  std::vector<int> leaderRanks;
  for (const auto& ranks : layout.hostRanks) leaderRanks.push_back(ranks.front());
  auto leaders = flat->newSubgroup(leaderRanks);
  DS_CHECK(local != nullptr, "hierarchical group: rank {} is on no host of {}", flat->rank(),
           layout.describe());
  if (flat->rank() == 0) {
    DS_LOG_INFO("comm", "hierarchical collectives: {} (within a host: {}; among leaders: {})",
                layout.describe(), isShmBackend(*local) ? "shared memory" : local->name(),
                flat->name());
  }
  return std::make_unique<HierBackend>(std::move(flat), std::move(local), std::move(leaders),
                                       layout, std::move(root), prefix, shm, globalRanks, minBytes);
}

bool isHierBackend(const Backend& b) { return dynamic_cast<const HierBackend*>(&b) != nullptr; }

}  // namespace ds::comm
