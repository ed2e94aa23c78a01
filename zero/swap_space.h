// checkSwapSpace: the up-front check of an nvme_path before any swap file is made: the folder can
// be created, files can be written there (a read-only mount or a permission shows here, not at
// the first step), and its file system has room for the swap files (statvfs f_bavail). Not the
// swap I/O (AsyncFile). Ranks sharing one disk each check the whole free space (the check does
// not know its neighbours); the swap files are written in full at start, so a shortfall among
// them still surfaces before the first step, as ENOSPC from the write.
#pragma once

#include <cstddef>
#include <string>

namespace ds::zero {

// key names the setting in the error ("zero_optimization.offload_optimizer.nvme_path"); bytes is
// the size of the swap files this rank is about to create there. Throws ConfigError naming the
// key, the folder, the bytes needed and the bytes free.
void checkSwapSpace(const std::string& key, const std::string& dir, size_t bytes);

}  // namespace ds::zero
