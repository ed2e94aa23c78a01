// TcpStore: the Store client over TCP (DESIGN.md §4.5), optionally hosting the server in this
// process (rank 0 does). Connects with retry until the timeout, presents the job token first
// (a rejected token is a CommError saying so), then one request/response at a time over one
// TCP_NODELAY connection. Thread-safe: calls are serialized on the connection, so a blocking
// get/wait holds it until it returns. Timeouts name the key(s), the server and the time waited.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "comm/store/store.h"
#include "comm/store/store_protocol.h"
#include "comm/store/tcp_socket.h"
#include "comm/store/tcp_store_server.h"

namespace ds::comm {

struct TcpStoreOptions {
  std::string host = "127.0.0.1";        // MASTER_ADDR
  int port = 29500;                      // MASTER_PORT (0 with isServer = ephemeral)
  bool isServer = false;                 // host the server here (rank 0)
  std::string bindHost;                  // server listen address; empty = host
  std::string token;                     // DS_JOB_TOKEN
  std::chrono::milliseconds timeout{0};  // connect and per-request; 0 = ds::defaultTimeout()
  // The hosting process, on destruction, waits this long for the other clients to disconnect
  // before stopping the server (so that their last replies are delivered).
  std::chrono::milliseconds serverLinger{10000};
};

class TcpStore : public Store {
 public:
  explicit TcpStore(TcpStoreOptions options);
  ~TcpStore() override;

  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key, std::chrono::milliseconds timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  Bytes compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool deleteKey(const std::string& key) override;
  int64_t numKeys() override;
  bool check(const std::vector<std::string>& keys) override;

  int port() const { return port_; }  // the real port (ephemeral resolved)
  std::string address() const;        // "host:port"
  std::chrono::milliseconds timeout() const { return timeout_; }
  TcpStoreServer* server() { return server_.get(); }  // null unless isServer

 private:
  proto::Response call(const proto::Request& r, std::chrono::milliseconds extra);
  void checkTimeout(const proto::Request& r, const proto::Response& resp, const char* what);

  TcpStoreOptions options_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<TcpStoreServer> server_;
  int port_ = 0;
  std::mutex mu_;
  Fd fd_;
  std::string broken_;  // why the connection is unusable, once it is
};

}  // namespace ds::comm
