// Checkpoint file names (see layout.h).
#include "runtime/checkpoint/layout.h"

#include <cctype>

#include <fmt/format.h>

#include "core/error.h"

namespace ds::runtime::ckpt {

std::string optimFileName(int rank) { return fmt::format("optim_rank_{:05d}.safetensors", rank); }
std::string rankEntryFileName(int rank) { return fmt::format("optim_rank_{:05d}.json", rank); }

std::string rangeTensorName(const std::string& state, size_t offset) {
  return fmt::format("{}@{}", state, offset);
}

bool parseRangeTensorName(const std::string& name, std::string* state, size_t* offset) {
  size_t at = name.rfind('@');
  if (at == std::string::npos || at == 0 || at + 1 == name.size()) return false;
  size_t v = 0;
  for (size_t i = at + 1; i < name.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) return false;
    v = v * 10 + static_cast<size_t>(name[i] - '0');
  }
  *state = name.substr(0, at);
  *offset = v;
  return true;
}

void checkTag(const std::string& tag) {
  bool ok = !tag.empty() && tag != "." && tag != ".." && tag.size() <= 200;
  for (char c : tag) ok = ok && c != '/' && !std::isspace(static_cast<unsigned char>(c)) && c != 0;
  if (!ok) {
    throw ConfigError(
        fmt::format("checkpoint tag '{}' invalid: use a plain directory name such as "
                    "global_step100 (no '/', spaces, '.' or '..')",
                    tag));
  }
}

std::string crcHex(uint32_t crc) { return fmt::format("{:08x}", crc); }

}  // namespace ds::runtime::ckpt
