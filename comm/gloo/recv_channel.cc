// GlooLink's receive channels: per collective shape, two persistent receive regions per peer used
// by alternate calls; the receive for the next call is posted as soon as this call's message is
// in. With unbound buffers a sender's data leaves only once the receiver's ready-to-receive notice
// has arrived; posting that notice a call ahead takes the handshake (a round trip plus an
// I/O-thread wakeup) off the critical path for every repeated shape.
// Slots: kChannelPrefix | id << 40 | seq.
#include <algorithm>
#include <numeric>

#include "comm/gloo/gloo_link.h"
#include "core/error.h"

namespace ds::comm::gloo_impl {
namespace {

constexpr uint64_t kChannelPrefix = uint64_t{3} << 62;
constexpr int kSeqBits = 40;

}  // namespace

RecvChannel* GlooLink::channel(const std::vector<size_t>& key,
                               const std::vector<size_t>& recvBytes, size_t shapeBytes,
                               const char* what) {
  auto it = channels_.find(key);
  if (it != channels_.end()) {
    RecvChannel& c = it->second;
    for (int p = 0; p < size(); ++p) postChannel(c, p, c.seq, what, false);  // any left over
    return &c;
  }
  if (channels_.size() >= kMaxChannels || channelBytes_ + shapeBytes > kMaxChannelBytes) {
    return nullptr;
  }
  DS_CHECK(static_cast<int>(recvBytes.size()) == size(), "channel: {} peers' sizes for {} ranks",
           recvBytes.size(), size());
  RecvChannel& c = channels_[key];
  c.id = channels_.size() - 1;
  c.bytes = recvBytes;
  c.offsets.resize(recvBytes.size());
  std::exclusive_scan(recvBytes.begin(), recvBytes.end(), c.offsets.begin(), size_t{0});
  c.half = c.offsets.back() + recvBytes.back();
  c.data.reset(new char[std::max<size_t>(2 * c.half, 1)]);
  for (int h = 0; h < 2; ++h) {
    c.bufs[h].resize(recvBytes.size());
    c.posted[h].assign(recvBytes.size(), 0);
    for (size_t p = 0; p < recvBytes.size(); ++p) {
      if (recvBytes[p] == 0) continue;
      c.bufs[h][p] = buffer(c.data.get() + h * c.half + c.offsets[p], recvBytes[p]);
    }
  }
  channelBytes_ += shapeBytes;
  for (int p = 0; p < size(); ++p) postChannel(c, p, 0, what, false);
  return &c;
}

uint64_t GlooLink::channelSlot(const RecvChannel& c) {
  return kChannelPrefix | (c.id << kSeqBits) | (c.seq % (uint64_t{1} << kSeqBits));
}

void GlooLink::postChannel(RecvChannel& c, int p, uint64_t seq, const char* what, bool quiet) {
  const int h = static_cast<int>(seq % 2);
  if (!c.bufs[h][p] || c.posted[h][p]) return;
  const uint64_t slot = kChannelPrefix | (c.id << kSeqBits) | (seq % (uint64_t{1} << kSeqBits));
  if (!quiet) {
    recv(c.bufs[h][p], p, slot, 0, c.bytes[p], what);
  } else {
    try {
      c.bufs[h][p]->recv(p, slot, 0, c.bytes[p]);
    } catch (const std::exception&) {
      return;  // posted (and any failure reported) at the next use
    }
  }
  c.posted[h][p] = 1;
}

char* GlooLink::channelWait(RecvChannel& c, int p, const char* what) {
  const int h = static_cast<int>(c.seq % 2);
  waitRecv(c.bufs[h][p], p, what);
  c.posted[h][p] = 0;
  // The other half was consumed by the previous call: the next call's message may land there now.
  postChannel(c, p, c.seq + 1, what, true);
  return c.region(p);
}

void GlooLink::finishChannel(RecvChannel& c) { ++c.seq; }

}  // namespace ds::comm::gloo_impl
