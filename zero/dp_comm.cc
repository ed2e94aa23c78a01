// DpComm: see dp_comm.h.
#include "zero/dp_comm.h"

#include <cstring>

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

comm::WorkPtr DpComm::reduceScatterSumQuantized(const float* input, float* output, size_t perRank) {
  if (single()) {
    bulkCopy(output, input, perRank);
    return nullptr;
  }
  constexpr int kTag = 0x5147;  // "QG"
  const size_t packed = quantPackedBytes(perRank), world = size_t(world_), me = size_t(rank_);
  std::vector<uint8_t> out(packed * world), in(packed * world);
  std::vector<comm::WorkPtr> works;
  for (size_t peer = 0; peer < world; ++peer) {
    if (peer == me) continue;
    quantizeBlocks(input + peer * perRank, perRank, out.data() + peer * packed);
    works.push_back(group_->send(
        {out.data() + peer * packed, packed, DType::kU8, comm::Device::kCpu}, int(peer), kTag));
  }
  for (size_t peer = 0; peer < world; ++peer) {
    if (peer == me) continue;
    works.push_back(group_->recv(
        {in.data() + peer * packed, packed, DType::kU8, comm::Device::kCpu}, int(peer), kTag));
  }
  for (auto& w : works) waitWork(w);
  bulkZero(output, perRank);
  for (size_t peer = 0; peer < world; ++peer) {
    if (peer == me) bulkAdd(output, input + me * perRank, perRank);
    else dequantizeAddBlocks(in.data() + peer * packed, perRank, output);
  }
  return nullptr;
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
