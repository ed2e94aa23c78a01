// The rendezvous key-value store interface (DESIGN.md §4.5). Implementations: TcpStore (the real
// one, hosted by rank 0), PrefixStore (a namespace over another store), HashStore (in-process,
// for thread-rank tests). All methods are thread-safe; every blocking call takes a timeout and
// throws TimeoutError naming the key(s), the store's peer and the time waited.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ds::comm {

using Bytes = std::vector<uint8_t>;

class Store {
 public:
  virtual ~Store() = default;

  virtual void set(const std::string& key, const Bytes& value) = 0;
  // Blocks until the key exists (up to timeout), then returns its value.
  virtual Bytes get(const std::string& key, std::chrono::milliseconds timeout) = 0;
  // Atomically adds delta to the integer stored at key (absent = 0); returns the new value.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  // If the current value equals expected (absent matches an empty expected), stores desired.
  // Returns the value now stored.
  virtual Bytes compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) = 0;
  // Blocks until every key exists; TimeoutError lists the keys still missing.
  virtual void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;
  // Returns true if the key existed.
  virtual bool deleteKey(const std::string& key) = 0;
  virtual int64_t numKeys() = 0;
  virtual bool check(const std::vector<std::string>& keys) = 0;  // all exist, non-blocking

  // Helpers over strings.
  void setString(const std::string& key, const std::string& value) {
    set(key, Bytes(value.begin(), value.end()));
  }
  std::string getString(const std::string& key, std::chrono::milliseconds timeout) {
    Bytes b = get(key, timeout);
    return std::string(b.begin(), b.end());
  }
};

}  // namespace ds::comm
