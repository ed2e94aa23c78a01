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
                               const char* what, size_t pieceBytes) {
  std::vector<size_t> fullKey = key;
  fullKey.push_back(pieceBytes);
  auto it = channels_.find(fullKey);
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
  RecvChannel& c = channels_[fullKey];
  c.id = channels_.size() - 1;
  c.pieceBytes = pieceBytes;
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
  // The pieces of one message share the slot: gloo matches a slot's receives in posting order.
  for (size_t k = 0; k < c.piecesOf(c.bytes[p]); ++k) {
    const size_t off = c.pieceOffset(k), n = c.pieceSize(c.bytes[p], k);
    if (!quiet) {
      recv(c.bufs[h][p], p, slot, off, n, what);
    } else {
      try {
        c.bufs[h][p]->recv(p, slot, off, n);
      } catch (const std::exception&) {
        return;  // posted (and any failure reported) at the next use; the group is broken
      }
    }
  }
  c.posted[h][p] = 1;
}

char* GlooLink::channelWait(RecvChannel& c, int p, const char* what) {
  for (size_t k = 0, n = c.piecesOf(c.bytes[p]); k < n; ++k) channelWaitPiece(c, p, k, what);
  return c.region(p);
}

char* GlooLink::channelWaitPiece(RecvChannel& c, int p, size_t k, const char* what) {
  const int h = static_cast<int>(c.seq % 2);
  waitRecv(c.bufs[h][p], p, what);  // pieces complete in order: one completion is piece k
  if (k + 1 == c.piecesOf(c.bytes[p])) {
    c.posted[h][p] = 0;
    // The other half was consumed by the previous call: the next call's message may land there.
    postChannel(c, p, c.seq + 1, what, true);
  }
  return c.region(p) + c.pieceOffset(k);
}

void GlooLink::sendPieces(const RecvChannel& c, UBuf& b, int peer, size_t offset, size_t bytes,
                          const char* what) {
  for (size_t k = 0; k < c.piecesOf(bytes); ++k)
    send(b, peer, channelSlot(c), offset + c.pieceOffset(k), c.pieceSize(bytes, k), what);
}

void GlooLink::waitSendPieces(const RecvChannel& c, UBuf& b, int peer, size_t bytes,
                              const char* what) {
  for (size_t k = 0; k < c.piecesOf(bytes); ++k) waitSend(b, peer, what);
}

void GlooLink::finishChannel(RecvChannel& c) { ++c.seq; }

}  // namespace ds::comm::gloo_impl
