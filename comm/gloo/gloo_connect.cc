// Device and full-mesh connection. Each rank publishes "joined/<rank>" before connecting so that
// a rendezvous timeout can list exactly who never arrived.
#include "comm/gloo/gloo_connect.h"

#include <arpa/inet.h>
#include <gloo/common/error.h>
#include <gloo/transport/tcp/device.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "comm/gloo/store_adapter.h"
#include "core/core_knobs.h"
#include "core/error.h"

namespace ds::comm::gloo_impl {
namespace {

// Local address of a UDP socket "connected" to addr (no packet is sent).
std::string routeTo(const std::string& addr) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(addr.c_str(), "9", &hints, &res) != 0 || res == nullptr) return "";
  std::string out;
  int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  if (fd >= 0) {
    if (::connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
      sockaddr_in local{};
      socklen_t len = sizeof(local);
      char buf[INET_ADDRSTRLEN] = {0};
      if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0 &&
          inet_ntop(AF_INET, &local.sin_addr, buf, sizeof(buf)) != nullptr) {
        out = buf;
      }
    }
    ::close(fd);
  }
  freeaddrinfo(res);
  return out;
}

// libgloo writes with writev(), which raises SIGPIPE when the peer is gone; the default action
// would kill a survivor before it can report the dead peer as a CommError. Ignored only while
// the disposition is still the default, so a handler the embedding program installed stays.
void ignoreSigpipeIfDefault() {
  struct sigaction cur {};
  if (::sigaction(SIGPIPE, nullptr, &cur) != 0 || cur.sa_handler != SIG_DFL) return;
  struct sigaction ign {};
  ign.sa_handler = SIG_IGN;
  ::sigemptyset(&ign.sa_mask);
  ::sigaction(SIGPIPE, &ign, nullptr);
}

}  // namespace

std::string chooseHostAddr(const std::string& hostAddr) {
  if (!hostAddr.empty()) return hostAddr;
  auto master = knobString(knobs::kMasterAddr);
  if (!master || master->empty() || master->rfind("127.", 0) == 0 || *master == "localhost") {
    return "127.0.0.1";
  }
  std::string local = routeTo(*master);
  return local.empty() ? "127.0.0.1" : local;
}

std::shared_ptr<::gloo::transport::Device> createDevice(const std::string& hostAddr) {
  ::gloo::transport::tcp::attr attr;
  attr.hostname = chooseHostAddr(hostAddr);
  attr.ai_family = AF_INET;
  ignoreSigpipeIfDefault();
  try {
    return ::gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    throw CommError(
        fmt::format("gloo: cannot listen on {} (set GroupOptions.hostAddr or "
                    "MASTER_ADDR to a local address): {}",
                    attr.hostname, e.what()));
  }
}

std::shared_ptr<::gloo::rendezvous::Context> connectGroup(
    const std::shared_ptr<Store>& store, int rank, int size,
    const std::shared_ptr<::gloo::transport::Device>& device, std::chrono::milliseconds timeout) {
  store->setString(fmt::format("joined/{}", rank), "1");
  auto ctx = std::make_shared<::gloo::rendezvous::Context>(rank, size);
  ctx->setTimeout(timeout);
  StoreAdapter adapter(store, timeout);
  std::shared_ptr<::gloo::transport::Device> dev = device;
  try {
    ctx->connectFullMesh(adapter, dev);
  } catch (const TimeoutError&) {
    std::string missing;
    for (int r = 0; r < size; ++r) {
      if (!store->check({fmt::format("joined/{}", r)})) {
        missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      }
    }
    throw TimeoutError(fmt::format(
        "gloo rendezvous: rank {} waited {} ms (DS_TIMEOUT) for {} ranks; never arrived: {}", rank,
        timeout.count(), size, missing.empty() ? "(all arrived; mesh incomplete)" : missing));
  } catch (const ds::Error&) {
    throw;
  } catch (const std::exception& e) {
    throw CommError(fmt::format("gloo rendezvous: rank {} of {} could not connect the mesh: {}",
                                rank, size, e.what()));
  }
  // libgloo's connect returns on each rank once its own side of every pair is up, which can be
  // before a peer has finished the handshake of the same pair; a rank that then closed its
  // context at once (a group made and dropped, a rank failing right after) broke the peer's
  // connect with "connection closed by peer". Nobody returns before everyone is connected.
  store->setString(fmt::format("connected/{}", rank), "1");
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back(fmt::format("connected/{}", r));
  try {
    store->wait(keys, timeout);
  } catch (const TimeoutError&) {
    std::string missing;
    for (int r = 0; r < size; ++r)
      if (!store->check({keys[size_t(r)]}))
        missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    throw TimeoutError(fmt::format(
        "gloo rendezvous: rank {} waited {} ms (DS_TIMEOUT) for {} ranks to finish connecting; "
        "not connected: {}",
        rank, timeout.count(), size, missing));
  }
  return ctx;
}

}  // namespace ds::comm::gloo_impl
