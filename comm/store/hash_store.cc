// HashStore: map + mutex + condition variable. Writers notify_all; waiters re-check their keys.
#include "comm/store/hash_store.h"

#include <algorithm>

#include <fmt/format.h>

#include "comm/store/store_util.h"
#include "core/error.h"

namespace ds::comm {

namespace {
constexpr const char* kPeer = "the in-process HashStore";
}

void HashStore::set(const std::string& key, const Bytes& value) {
  {
    std::lock_guard<std::mutex> g(mu_);
    data_[key] = value;
  }
  cv_.notify_all();
}

std::vector<std::string> HashStore::waitMissingLocked(std::unique_lock<std::mutex>& lock,
                                                      const std::vector<std::string>& keys,
                                                      std::chrono::milliseconds timeout) {
  auto allThere = [&] {
    if (shutdown_) return true;
    for (const auto& k : keys)
      if (!data_.count(k)) return false;
    return true;
  };
  // Clamp so that now + timeout cannot overflow (a year is "forever" for a rendezvous).
  timeout = std::clamp<std::chrono::milliseconds>(timeout, std::chrono::milliseconds(0),
                                                  std::chrono::hours(24 * 365));
  auto deadline = std::chrono::steady_clock::now() + timeout;
  cv_.wait_until(lock, deadline, allThere);
  if (shutdown_) throw CommError("the store is shutting down");
  std::vector<std::string> missing;
  for (const auto& k : keys)
    if (!data_.count(k)) missing.push_back(k);
  return missing;
}

std::vector<std::string> HashStore::waitMissing(const std::vector<std::string>& keys,
                                                std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return waitMissingLocked(lock, keys, timeout);
}

void HashStore::shutdown() {
  {
    std::lock_guard<std::mutex> g(mu_);
    shutdown_ = true;
  }
  cv_.notify_all();
}

void HashStore::waitLocked(std::unique_lock<std::mutex>& lock, const std::vector<std::string>& keys,
                           std::chrono::milliseconds timeout) {
  auto start = std::chrono::steady_clock::now();
  std::vector<std::string> missing = waitMissingLocked(lock, keys, timeout);
  if (missing.empty()) return;
  auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);
  throw TimeoutError(timeoutMessage(keys.size() == 1 ? "get" : "wait", missing, kPeer, waited));
}

Bytes HashStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  waitLocked(lock, {key}, timeout);
  return data_.at(key);
}

int64_t HashStore::add(const std::string& key, int64_t delta) {
  int64_t v;
  {
    std::lock_guard<std::mutex> g(mu_);
    auto it = data_.find(key);
    const int64_t now = it == data_.end() ? 0 : parseCounter(key, it->second);
    if (__builtin_add_overflow(now, delta, &v))  // a client's delta: refused, not wrapped (UB)
      throw CommError(
          fmt::format("store add '{}': {} + {} overflows a 64-bit counter", key, now, delta));
    data_[key] = encodeCounter(v);
  }
  cv_.notify_all();
  return v;
}

Bytes HashStore::compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) {
  Bytes now;
  bool changed = false;
  {
    std::lock_guard<std::mutex> g(mu_);
    auto it = data_.find(key);
    if (it == data_.end()) {
      if (expected.empty()) {
        data_[key] = desired;
        changed = true;
        now = desired;
      }  // else: nothing stored, and `now` stays empty (the value now stored: none)
    } else if (it->second == expected) {
      it->second = desired;
      changed = true;
      now = desired;
    } else {
      now = it->second;
    }
  }
  if (changed) cv_.notify_all();
  return now;
}

void HashStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  waitLocked(lock, keys, timeout);
}

bool HashStore::deleteKey(const std::string& key) {
  std::lock_guard<std::mutex> g(mu_);
  return data_.erase(key) > 0;
}

int64_t HashStore::numKeys() {
  std::lock_guard<std::mutex> g(mu_);
  return static_cast<int64_t>(data_.size());
}

bool HashStore::check(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> g(mu_);
  for (const auto& k : keys)
    if (!data_.count(k)) return false;
  return true;
}

}  // namespace ds::comm
