// DpComm: see dp_comm.h.
#include "zero/dp_comm.h"

#include <fmt/format.h>

#include <cstring>
#include <mutex>

#include "comm/process_group.h"
#include "core/error.h"
#include "zero/block_quant.h"
#include "zero/bulk_ops.h"

namespace ds::zero {

DpComm::DpComm(comm::ProcessGroup* group) : group_(group) {
  if (group_) {
    rank_ = group_->rank();
    world_ = group_->size();
  }
}

DpComm::~DpComm() = default;
DpComm::DpComm(DpComm&&) noexcept = default;
DpComm& DpComm::operator=(DpComm&&) noexcept = default;

DpComm DpComm::consecutiveSubgroup(int size) {
  DS_CHECK(size >= 1 && world_ % size == 0, "consecutiveSubgroup({}) of a group of {}", size,
           world_);
  if (single() || size == 1) {
    DpComm self(nullptr);
    return self;
  }
  std::unique_ptr<comm::ProcessGroup> mine;
  for (int first = 0; first < world_; first += size) {
    std::vector<int> ranks;
    for (int r = first; r < first + size; ++r) ranks.push_back(r);
    auto sub = group_->newSubgroup(ranks);
    if (sub) mine = std::move(sub);
  }
  DpComm out(mine.get());
  out.owned_ = std::move(mine);
  return out;
}

DpComm DpComm::stridedSubgroup(int stride) {
  DS_CHECK(stride >= 1 && world_ % stride == 0, "stridedSubgroup({}) of a group of {}", stride,
           world_);
  if (single() || stride == world_) {
    DpComm self(nullptr);
    return self;
  }
  std::unique_ptr<comm::ProcessGroup> mine;
  for (int first = 0; first < stride; ++first) {
    std::vector<int> ranks;
    for (int r = first; r < world_; r += stride) ranks.push_back(r);
    auto sub = group_->newSubgroup(ranks);
    if (sub) mine = std::move(sub);
  }
  DpComm out(mine.get());
  out.owned_ = std::move(mine);
  return out;
}

size_t DpComm::mappedPeerBytes(size_t bytes) const {
  return single() ? 0 : group_->mappedPeerBytes(bytes);
}

comm::WorkPtr DpComm::allreduceSum(float* buf, size_t count) {
  if (single() || count == 0) return nullptr;
  return group_->allreduce(comm::view(buf, count), comm::ReduceOp::kSum);
}

comm::WorkPtr DpComm::reduceScatterSum(const float* input, float* output,
                                       const std::vector<size_t>& counts) {
  DS_CHECK_EQ(counts.size(), size_t(world_));
  if (single()) {
    bulkCopy(output, input, counts[0]);
    return nullptr;
  }
  size_t total = 0;
  for (size_t count : counts) total += count;
  return group_->reduceScatter(comm::view(const_cast<float*>(input), total),
                               comm::view(output, counts[size_t(rank_)]), counts,
                               comm::ReduceOp::kSum);
}

namespace {

// qgZ's handle: the point-to-point messages are in flight; the first wait() waits for them and
// then sums this rank's block (its own values exactly, the others dequantized, in rank order).
class QuantizedReduceScatter final : public comm::Work {
 public:
  QuantizedReduceScatter(const float* input, float* output, size_t perRank, int rank, int world)
      : Work(fmt::format("qgZ reduce-scatter of {} elements per rank (rank {} of {})", perRank,
                         rank, world)),
        input_(input),
        output_(output),
        perRank_(perRank),
        rank_(size_t(rank)),
        world_(size_t(world)),
        packed_(quantPackedBytes(perRank)),
        out_(packed_ * world_),
        in_(packed_ * world_) {}

  void issue(comm::ProcessGroup& group) {
    constexpr int kTag = 0x5147;  // "QG"
    for (size_t peer = 0; peer < world_; ++peer) {
      if (peer == rank_) continue;
      quantizeBlocks(input_ + peer * perRank_, perRank_, out_.data() + peer * packed_);
      messages_.push_back(group.send(view(out_, peer), int(peer), kTag));
    }
    for (size_t peer = 0; peer < world_; ++peer)
      if (peer != rank_) messages_.push_back(group.recv(view(in_, peer), int(peer), kTag));
  }

  void wait(std::chrono::milliseconds timeout) override {
    std::call_once(summed_, [&] {
      try {
        for (auto& message : messages_) message->wait(timeout);
        bulkZero(output_, perRank_);
        for (size_t peer = 0; peer < world_; ++peer) {
          if (peer == rank_) bulkAdd(output_, input_ + rank_ * perRank_, perRank_);
          else dequantizeAddBlocks(in_.data() + peer * packed_, perRank_, output_);
        }
        markCompleted();
      } catch (...) {
        markFailed(std::current_exception());
      }
    });
    Work::wait(timeout);
  }

 private:
  comm::BufferView view(std::vector<uint8_t>& buf, size_t peer) {
    return {buf.data() + peer * packed_, packed_, DType::kU8, comm::Device::kCpu};
  }

  const float* input_;
  float* output_;
  size_t perRank_, rank_, world_, packed_;
  std::vector<uint8_t> out_, in_;
  std::vector<comm::WorkPtr> messages_;
  std::once_flag summed_;
};

}  // namespace

comm::WorkPtr DpComm::reduceScatterSumQuantized(const float* input, float* output, size_t perRank) {
  if (single()) {
    bulkCopy(output, input, perRank);
    return nullptr;
  }
  auto work = std::make_shared<QuantizedReduceScatter>(input, output, perRank, rank_, world_);
  work->issue(*group_);
  return work;
}

comm::WorkPtr DpComm::allgather(const void* input, void* output, const std::vector<size_t>& counts,
                                DType dtype) {
  DS_CHECK_EQ(counts.size(), size_t(world_));
  const size_t elem = dtypeSize(dtype);
  size_t before = 0, total = 0;
  for (int peer = 0; peer < world_; ++peer) {
    if (peer < rank_) before += counts[size_t(peer)];
    total += counts[size_t(peer)];
  }
  if (single()) {
    if (static_cast<char*>(output) + before * elem != input)
      std::memmove(static_cast<char*>(output) + before * elem, input, counts[size_t(rank_)] * elem);
    return nullptr;
  }
  comm::BufferView inView{const_cast<void*>(input), counts[size_t(rank_)], dtype,
                          comm::Device::kCpu};
  comm::BufferView outView{output, total, dtype, comm::Device::kCpu};
  return group_->allgather(inView, outView, counts);
}

std::vector<double> DpComm::allgatherDouble(double value) {
  std::vector<double> all(size_t(world_), value);
  if (single()) return all;
  // A double travels as two fp32 words: allgather copies bytes, no arithmetic on them.
  float words[2];
  std::memcpy(words, &value, 8);
  std::vector<float> out(size_t(world_) * 2);
  waitWork(group_->allgather(comm::view(words, 2), comm::view(out.data(), out.size()),
                             std::vector<size_t>(size_t(world_), 2)));
  std::memcpy(all.data(), out.data(), out.size() * sizeof(float));
  return all;
}

void waitWork(const comm::WorkPtr& work) {
  if (work) work->wait();
}

}  // namespace ds::zero
