// Counter encoding and the shared timeout message of the Store implementations.
#include "comm/store/store_util.h"

#include <fmt/format.h>

#include <charconv>

#include "core/error.h"

namespace ds::comm {

int64_t parseCounter(const std::string& key, const Bytes& value) {
  if (value.empty()) return 0;
  const char* b = reinterpret_cast<const char*>(value.data());
  const char* e = b + value.size();
  int64_t v = 0;
  auto [p, ec] = std::from_chars(b, e, v);
  if (ec != std::errc() || p != e)
    throw CommError(
        fmt::format("store key '{}' holds '{}', not an integer counter (add() needs "
                    "a decimal integer value)",
                    key, std::string(b, std::min<size_t>(value.size(), 64))));
  return v;
}

Bytes encodeCounter(int64_t v) {
  std::string s = std::to_string(v);
  return Bytes(s.begin(), s.end());
}

std::string timeoutMessage(const std::string& what, const std::vector<std::string>& missing,
                           const std::string& peer, std::chrono::milliseconds waited) {
  return fmt::format("store {} timed out after {:.3f} s on {}: key{} still missing: {}", what,
                     std::chrono::duration<double>(waited).count(), peer,
                     missing.size() == 1 ? "" : "s", fmt::join(missing, ", "));
}

}  // namespace ds::comm
