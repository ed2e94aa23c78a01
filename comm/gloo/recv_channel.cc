// GlooLink's receive channels: per collective shape, one persistent receive region per peer whose
// receive for the next call is posted as soon as the current one has been consumed. With unbound
// buffers a sender's data leaves only once the receiver's ready-to-receive notice has arrived;
// posting that notice one call ahead takes the handshake (a round trip plus an I/O-thread wakeup)
// off the critical path for every repeated shape. Slots: kChannelPrefix | id << 40 | seq.
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
    postChannel(it->second, what, false);  // any receive finishChannel could not post
    return &it->second;
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
  const size_t total = c.offsets.back() + recvBytes.back();
  c.data.reset(new char[std::max<size_t>(total, 1)]);
  c.bufs.resize(recvBytes.size());
  c.posted.assign(recvBytes.size(), 0);
  for (size_t p = 0; p < recvBytes.size(); ++p) {
    if (recvBytes[p] > 0) c.bufs[p] = buffer(c.region(static_cast<int>(p)), recvBytes[p]);
  }
  channelBytes_ += shapeBytes;
  postChannel(c, what, false);
  return &c;
}

uint64_t GlooLink::channelSlot(const RecvChannel& c) {
  return kChannelPrefix | (c.id << kSeqBits) | (c.seq % (uint64_t{1} << kSeqBits));
}

void GlooLink::postChannel(RecvChannel& c, const char* what, bool quiet) {
  for (size_t p = 0; p < c.bufs.size(); ++p) {
    if (!c.bufs[p] || c.posted[p]) continue;
    if (!quiet) {
      recv(c.bufs[p], static_cast<int>(p), channelSlot(c), 0, c.bytes[p], what);
    } else {
      try {
        c.bufs[p]->recv(static_cast<int>(p), channelSlot(c), 0, c.bytes[p]);
      } catch (const std::exception&) {
        continue;  // posted (and any failure reported) at the next use
      }
    }
    c.posted[p] = 1;
  }
}

void GlooLink::finishChannel(RecvChannel& c, const char* what) {
  ++c.seq;
  std::fill(c.posted.begin(), c.posted.end(), 0);
  postChannel(c, what, true);
}

}  // namespace ds::comm::gloo_impl
