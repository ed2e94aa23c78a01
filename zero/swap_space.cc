// checkSwapSpace; see swap_space.h.
#include "zero/swap_space.h"

#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "core/error.h"

namespace ds::zero {

void checkSwapSpace(const std::string& key, const std::string& dir, size_t bytes) {
  if (dir.empty()) throw ConfigError(key + ": required when device is nvme");
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (!std::filesystem::is_directory(dir))
    throw ConfigError(fmt::format("{} '{}': not a directory we can create{}", key, dir,
                                  error ? " (" + error.message() + ")" : ""));
  std::string probe = dir + "/.dsrt-swap-check-XXXXXX";
  const int fd = ::mkstemp(probe.data());
  if (fd < 0)
    throw ConfigError(fmt::format("{} '{}': cannot create the swap files ({} bytes needed): {}",
                                  key, dir, bytes, std::strerror(errno)));
  ::close(fd);
  ::unlink(probe.c_str());
  struct statvfs stats {};
  if (::statvfs(dir.c_str(), &stats) != 0) return;  // no figure: the writes will tell
  const size_t free = size_t(stats.f_bavail) * size_t(stats.f_frsize);
  if (free < bytes)
    throw ConfigError(fmt::format(
        "{} '{}': the swap files need {} bytes ({:.1f} MiB) but the file system has {} bytes "
        "({:.1f} MiB) free: {} bytes missing (free space there, another nvme_path, more ranks or "
        "a higher ZeRO stage)",
        key, dir, bytes, double(bytes) / 1048576.0, free, double(free) / 1048576.0, bytes - free));
}

}  // namespace ds::zero
