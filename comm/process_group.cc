// ProcessGroup: argument checks shared by every backend, then a forward to the Backend. The
// checks live here so that each backend sees only well-formed calls and every misuse gets the
// same message whichever library is underneath.
#include "comm/process_group.h"

#include <numeric>

#include "comm/backend.h"
#include "comm/device_staging.h"
#include "core/error.h"

namespace ds::comm {
namespace {

void checkCounts(const char* what, const std::vector<size_t>& counts, int size,
                 const BufferView& whole, const BufferView& part, int rank) {
  if (counts.size() != static_cast<size_t>(size)) {
    throw ConfigError(
        fmt::format("{}: {} counts given for a group of {} ranks", what, counts.size(), size));
  }
  size_t total = std::accumulate(counts.begin(), counts.end(), size_t{0});
  if (whole.count != total) {
    throw ConfigError(fmt::format("{}: full buffer holds {} elements, counts sum to {}", what,
                                  whole.count, total));
  }
  if (part.count != counts[rank]) {
    throw ConfigError(fmt::format("{}: rank {}'s block holds {} elements, counts[{}] = {}", what,
                                  rank, part.count, rank, counts[rank]));
  }
  if (whole.dtype != part.dtype) {
    throw ConfigError(fmt::format("{}: input and output dtypes differ ({} vs {})", what,
                                  dtypeName(whole.dtype), dtypeName(part.dtype)));
  }
}

void checkRank(const char* what, int r, int size) {
  if (r < 0 || r >= size) {
    throw ConfigError(fmt::format("{}: rank {} is outside the group of {} ranks", what, r, size));
  }
}

}  // namespace

ProcessGroup::ProcessGroup(std::unique_ptr<Backend> backend)
    : backend_(std::move(backend)), staging_(std::make_unique<DeviceStaging>()) {
  DS_CHECK(backend_ != nullptr, "ProcessGroup needs a backend");
}

bool ProcessGroup::staged(const std::vector<BufferView>& views) const {
  return anyOnDevice(views) && !backend_->supports(Device::kCuda);
}

ProcessGroup::~ProcessGroup() = default;

int ProcessGroup::rank() const { return backend_->rank(); }
int ProcessGroup::size() const { return backend_->size(); }
const std::string& ProcessGroup::backendName() const { return backend_->name(); }

WorkPtr ProcessGroup::allreduce(BufferView buf, ReduceOp op) {
  if (staged({buf}))
    return staging_->run("allreduce", {buf}, {true}, {true},
                         [&](const auto& h) { return backend_->allreduce(h[0], op); });
  return backend_->allreduce(buf, op);
}

WorkPtr ProcessGroup::reduceScatter(BufferView input, BufferView output,
                                    const std::vector<size_t>& counts, ReduceOp op) {
  checkCounts("reduce_scatter", counts, size(), input, output, rank());
  if (staged({input, output}))
    return staging_->run(
        "reduce_scatter", {input, output}, {true, false}, {false, true},
        [&](const auto& h) { return backend_->reduceScatter(h[0], h[1], counts, op); });
  return backend_->reduceScatter(input, output, counts, op);
}

WorkPtr ProcessGroup::allgather(BufferView input, BufferView output,
                                const std::vector<size_t>& counts) {
  checkCounts("allgather", counts, size(), output, input, rank());
  if (staged({input, output}))
    return staging_->run("allgather", {input, output}, {true, false}, {false, true},
                         [&](const auto& h) { return backend_->allgather(h[0], h[1], counts); });
  return backend_->allgather(input, output, counts);
}

WorkPtr ProcessGroup::broadcast(BufferView buf, int root) {
  checkRank("broadcast root", root, size());
  if (staged({buf}))
    return staging_->run("broadcast", {buf}, {rank() == root}, {true},
                         [&](const auto& h) { return backend_->broadcast(h[0], root); });
  return backend_->broadcast(buf, root);
}

WorkPtr ProcessGroup::reduce(BufferView buf, int root, ReduceOp op) {
  checkRank("reduce root", root, size());
  if (staged({buf}))
    return staging_->run("reduce", {buf}, {true}, {rank() == root},
                         [&](const auto& h) { return backend_->reduce(h[0], root, op); });
  return backend_->reduce(buf, root, op);
}

WorkPtr ProcessGroup::barrier() { return backend_->barrier(); }

WorkPtr ProcessGroup::send(BufferView buf, int dstRank, int tag) {
  checkRank("send destination", dstRank, size());
  if (dstRank == rank()) throw ConfigError("send: a rank cannot send to itself");
  if (staged({buf}))
    return staging_->run("send", {buf}, {true}, {false},
                         [&](const auto& h) { return backend_->send(h[0], dstRank, tag); });
  return backend_->send(buf, dstRank, tag);
}

WorkPtr ProcessGroup::recv(BufferView buf, int srcRank, int tag) {
  checkRank("recv source", srcRank, size());
  if (srcRank == rank()) throw ConfigError("recv: a rank cannot receive from itself");
  if (staged({buf}))
    return staging_->run("recv", {buf}, {false}, {true},
                         [&](const auto& h) { return backend_->recv(h[0], srcRank, tag); });
  return backend_->recv(buf, srcRank, tag);
}

std::unique_ptr<ProcessGroup> ProcessGroup::newSubgroup(const std::vector<int>& ranks) {
  for (int r : ranks) checkRank("newSubgroup member", r, size());
  auto sub = backend_->newSubgroup(ranks);
  if (!sub) return nullptr;
  return std::make_unique<ProcessGroup>(std::move(sub));
}

size_t ProcessGroup::mappedPeerBytes(size_t bufferBytes) const {
  return backend_->mappedPeerBytes(bufferBytes);
}

}  // namespace ds::comm
