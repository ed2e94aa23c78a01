// GlooLink's receive channels: per collective shape, one persistent receive region per peer,
// reused by every call of the shape, with its unbound buffer created once. Each call posts its
// receives right after its own sends (see RecvChannel in gloo_link.h for why not earlier), one
// receive per piece on the call's slot; gloo matches a slot's receives in posting order, so the
// k-th completion is piece k. Slots: kChannelPrefix | id << 40 | seq.
#include <algorithm>
#include <numeric>

#include "comm/gloo/gloo_link.h"
#include "core/error.h"

namespace ds::comm::gloo_impl {
namespace {

constexpr uint64_t kChannelPrefix = uint64_t{3} << 62;
constexpr int kSeqBits = 40;

}  // namespace

RecvChannel* GlooLink::channel(const std::vector<size_t>& key, const std::vector<size_t>& recvBytes,
                               size_t shapeBytes, Pieces pieces) {
  std::vector<size_t> fullKey = key;
  fullKey.push_back(pieces.bytes);
  auto it = channels_.find(fullKey);
  if (it != channels_.end()) return &it->second;
  if (channels_.size() >= kMaxChannels || channelBytes_ + shapeBytes > kMaxChannelBytes) {
    return nullptr;
  }
  DS_CHECK(static_cast<int>(recvBytes.size()) == size(), "channel: {} peers' sizes for {} ranks",
           recvBytes.size(), size());
  RecvChannel& c = channels_[fullKey];
  c.id = channels_.size() - 1;
  c.pieces = pieces;
  c.bytes = recvBytes;
  c.offsets.resize(recvBytes.size());
  std::exclusive_scan(recvBytes.begin(), recvBytes.end(), c.offsets.begin(), size_t{0});
  const size_t total = c.offsets.back() + recvBytes.back();
  c.data.reset(new char[std::max<size_t>(total, 1)]);
  c.bufs.resize(recvBytes.size());
  for (size_t p = 0; p < recvBytes.size(); ++p) {
    if (recvBytes[p] > 0) c.bufs[p] = buffer(c.data.get() + c.offsets[p], recvBytes[p]);
  }
  channelBytes_ += shapeBytes;
  return &c;
}

uint64_t GlooLink::channelSlot(const RecvChannel& c) {
  return kChannelPrefix | (c.id << kSeqBits) | (c.seq % (uint64_t{1} << kSeqBits));
}

void GlooLink::channelPost(RecvChannel& c, const char* what) {
  for (int p = 0; p < size(); ++p) {
    if (c.bytes[p] > 0) recvPieces(c.pieces, c.bufs[p], p, channelSlot(c), 0, c.bytes[p], what);
  }
}

char* GlooLink::channelWait(RecvChannel& c, int p, const char* what) {
  waitRecvPieces(c.pieces, c.bufs[p], p, c.bytes[p], what);
  return c.region(p);
}

char* GlooLink::channelWaitPiece(RecvChannel& c, int p, size_t k, const char* what) {
  waitRecv(c.bufs[p], p, what);  // pieces complete in order: this completion is piece k
  return c.region(p) + c.pieces.offset(k);
}

void GlooLink::finishChannel(RecvChannel& c) { ++c.seq; }

}  // namespace ds::comm::gloo_impl
