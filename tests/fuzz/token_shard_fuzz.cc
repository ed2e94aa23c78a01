// fuzz-sources: runtime/data/token_shard.cc
// fuzz-deps: ds_rt_data
// Fuzz harness for the llm.c token shard reader: the input is a whole shard file, written to a
// memfd and opened by path (/proc/self/fd/N) exactly as a file on disk. Invariants checked:
// nothing crashes; a shard that opens has size() == (bytes - header) / 2 tokens, every one of
// which can be read (ASan sees any read past the mapping).
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "runtime/data/token_shard.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const int fd = [] {
    int f = ::memfd_create("fuzz-shard", MFD_CLOEXEC);
    if (f < 0) std::abort();
    return f;
  }();
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);
  if (::ftruncate(fd, 0) != 0) std::abort();
  for (size_t off = 0; off < size;) {
    ssize_t n = ::pwrite(fd, data + off, size - off, static_cast<off_t>(off));
    if (n <= 0) std::abort();
    off += static_cast<size_t>(n);
  }
  std::unique_ptr<ds::runtime::TokenShard> s;
  try {
    s = ds::runtime::TokenShard::open(path);
  } catch (const ds::ConfigError&) {
    return 0;
  }
  const size_t header = ds::runtime::kShardHeaderInts * sizeof(int32_t);
  if (size < header || s->size() != (size - header) / 2 || (size - header) % 2) std::abort();
  unsigned sum = 0;
  for (size_t i = 0; i < s->size(); ++i) sum += s->tokens()[i];
  volatile unsigned sink = sum;
  (void)sink;
  return 0;
}
