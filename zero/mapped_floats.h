// MappedFloats: a float array backed by an unnamed file in a folder (the nvme_path), mapped shared,
// so its pages live in the page cache and the kernel writes them to disk and reclaims them under
// memory pressure (a memory cgroup's limit, or the machine's), instead of holding them as anonymous
// memory. Why: ZeRO-Infinity's gradient partition at stage 3 with offload_optimizer on nvme is 4
// bytes per parameter of the rank's partition, the largest host buffer left once parameters and
// optimizer states are on disk (DeepSpeed swaps these gradients to nvme too).
// The file is made with O_TMPFILE (no name, so no planted symlink can redirect it, and nothing is
// left behind on a crash), or, where the file system lacks it, created O_EXCL|O_NOFOLLOW and
// unlinked at once. Starts all zeros. RAII: unmapped and closed on destruction.
#pragma once

#include <cstddef>
#include <string>

namespace ds::zero {

class MappedFloats {
 public:
  // what names the buffer in errors ("gradient partition"); key the setting that chose dir.
  MappedFloats(const std::string& dir, size_t count, const std::string& what,
               const std::string& key);
  ~MappedFloats();
  MappedFloats(const MappedFloats&) = delete;
  MappedFloats& operator=(const MappedFloats&) = delete;

  float* data() const { return data_; }
  size_t size() const { return count_; }
  // Every element back to 0 without touching the pages: the file's blocks are deallocated
  // (fallocate PUNCH_HOLE), so the next reads see zeros and nothing is written back. Falls back
  // to writing zeros where the file system cannot punch holes.
  void zero();

 private:
  float* data_ = nullptr;
  size_t count_ = 0;
  int descriptor_ = -1;
  bool punchHoles_ = true;
};

}  // namespace ds::zero
