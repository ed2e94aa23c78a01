// llm.c shard reading (mmap) and writing (tmp + rename); see token_shard.h.
#include "runtime/data/token_shard.h"

#include <fcntl.h>
#include <glob.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "core/error.h"
#include "core/safe_file.h"

namespace ds::runtime {
namespace {

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

constexpr size_t kHeaderBytes = kShardHeaderInts * sizeof(int32_t);

}  // namespace

std::unique_ptr<TokenShard> TokenShard::open(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0)
    throw ConfigError(fmt::format("token shard '{}': cannot open: {}", path, std::strerror(errno)));
  struct stat st {};
  DS_SYS_CHECK(::fstat(fd.get(), &st), "fstat token shard '{}'", path);
  size_t bytes = size_t(st.st_size);
  if (bytes < kHeaderBytes)
    throw ConfigError(fmt::format(
        "token shard '{}': truncated header ({} bytes, an llm.c shard starts with {} bytes)", path,
        bytes, kHeaderBytes));
  int32_t header[kShardHeaderInts];
  ssize_t got =
      DS_SYS_CHECK(::pread(fd.get(), header, kHeaderBytes, 0), "read header of '{}'", path);
  if (size_t(got) != kHeaderBytes)
    throw ConfigError(fmt::format("token shard '{}': short read of the header", path));
  if (header[0] != kShardMagic)
    throw ConfigError(
        fmt::format("token shard '{}': bad magic {} (expected {}: llm.c uint16 token "
                    "shard)",
                    path, header[0], kShardMagic));
  if (header[1] != kShardVersion)
    throw ConfigError(fmt::format("token shard '{}': unsupported version {} (expected {})", path,
                                  header[1], kShardVersion));
  if (header[2] < 0)
    throw ConfigError(fmt::format("token shard '{}': negative token count {}", path, header[2]));
  size_t count = size_t(uint32_t(header[2]));
  size_t want = kHeaderBytes + count * sizeof(uint16_t);
  if (bytes != want)
    throw ConfigError(fmt::format(
        "token shard '{}': {} (header says {} tokens = {} bytes, file has {} bytes)", path,
        bytes < want ? "truncated" : "trailing bytes after the tokens", count, want, bytes));
  std::unique_ptr<TokenShard> s(new TokenShard());
  s->path_ = path;
  s->count_ = count;
  s->mapBytes_ = bytes;
  void* m = ::mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd.get(), 0);
  if (m == MAP_FAILED) throw SystemError(fmt::format("mmap token shard '{}'", path), errno);
  s->map_ = m;
  s->tokens_ = reinterpret_cast<const uint16_t*>(static_cast<const char*>(m) + kHeaderBytes);
  return s;
}

TokenShard::~TokenShard() {
  if (map_) ::munmap(map_, mapBytes_);
}

void writeTokenShard(const std::string& path, const std::vector<uint16_t>& tokens) {
  if (tokens.size() > size_t(INT32_MAX))
    throw ConfigError(fmt::format("token shard '{}': {} tokens exceed the int32 count field", path,
                                  tokens.size()));
  int32_t header[kShardHeaderInts] = {};
  header[0] = kShardMagic;
  header[1] = kShardVersion;
  header[2] = int32_t(tokens.size());
  std::string tmp = tempNameFor(path);
  {
    // Never through a planted name (core/safe_file); our own leftover is replaced.
    Fd fd(createFile(tmp, O_WRONLY, 0644, ExistingFile::kReplace, "token shard temp file"));
    auto writeAll = [&](const void* p, size_t n) {
      const char* c = static_cast<const char*>(p);
      while (n) {
        ssize_t w = DS_SYS_CHECK(::write(fd.get(), c, n), "write token shard '{}'", tmp);
        c += w;
        n -= size_t(w);
      }
    };
    writeAll(header, sizeof(header));
    writeAll(tokens.data(), tokens.size() * sizeof(uint16_t));
    DS_SYS_CHECK(::fsync(fd.get()), "fsync token shard '{}'", tmp);
  }
  DS_SYS_CHECK(::rename(tmp.c_str(), path.c_str()), "rename '{}' to '{}'", tmp, path);
}

std::vector<std::string> expandShardGlob(const std::string& pattern, const std::string& what) {
  glob_t g{};
  int rc = ::glob(pattern.c_str(), 0, nullptr, &g);
  std::vector<std::string> out;
  if (rc == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  ::globfree(&g);
  if (out.empty())
    throw ConfigError(fmt::format(
        "{}: no token shard matches '{}' (dsrt prepare-data TEXT PREFIX makes PREFIX_train_*.bin "
        "and PREFIX_val_*.bin from a text file; llm.c's .bin shards work as they are)",
        what, pattern));
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace ds::runtime
