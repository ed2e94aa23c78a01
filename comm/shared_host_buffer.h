// SharedHostBuffer: host memory the other processes of this host may map, for the buffers that
// collectives move over and over (ZeRO stage 0's gradients, comm-bench's buffers). Why: the
// shared-memory transport (comm/shm) otherwise moves a peer's buffer with cross-memory-attach
// copies, a kernel copy through a scratch chunk each way; through its own mapping of the peer's
// buffer it reads and writes it in place (measured 1.5x the busbw at 16 MiB on a 2-rank host,
// bench/results/comm_efficiency.txt).
// Backing: an unnamed memfd mapped shared. Nothing gets a name in /dev/shm or any folder (no
// collision, no planted symlink, nothing left behind: the memory goes with the last process that
// maps it, kill -9 included). Every live buffer is in a process-wide registry (findSharedRegion)
// that the transport looks the buffers of a collective up in; a local peer maps a region by
// opening /proc/<pid>/fd/<fd> (allowed where CMA is: the same ptrace rule) and checking the
// file's identity (comm/shm/peer_maps.h). DS_COMM_SHM_MAP=0, or a memfd that cannot be made,
// gives private memory from the allocator (calloc, as a std::vector's), not registered (collectives
// then copy with CMA, as for any other buffer). Starts zeroed. RAII, move-only; the registry is
// thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <type_traits>

namespace ds::comm {

// Where a registered buffer's bytes are, for a peer process to map them.
struct SharedRegion {
  int fd = -1;          // the owner's descriptor of the memfd
  uint64_t id = 0;      // unique within the owner's process for its lifetime (never reused)
  uint64_t inode = 0;   // fstat identity of the memfd: a peer checks what it opened against it
  uint64_t device = 0;  //
  uint64_t bytes = 0;   // the mapped size (whole pages)
  uint64_t offset = 0;  // of the looked-up address from the region's start
};

// The registered region that holds `address`, if any.
std::optional<SharedRegion> findSharedRegion(const void* address);
// How many registered buffers this process has released so far: a peer that sees it change drops
// its mappings of this process's regions (they may hold memory the owner no longer uses).
uint64_t sharedRegionsReleased();

class SharedHostBuffer {
 public:
  SharedHostBuffer() = default;
  // `bytes` zeroed bytes (none for 0); share false: private memory whatever DS_COMM_SHM_MAP says.
  // Throws SystemError when no memory can be had at all.
  explicit SharedHostBuffer(size_t bytes, bool share = true);
  ~SharedHostBuffer();
  SharedHostBuffer(SharedHostBuffer&& other) noexcept;
  SharedHostBuffer& operator=(SharedHostBuffer&& other) noexcept;
  SharedHostBuffer(const SharedHostBuffer&) = delete;
  SharedHostBuffer& operator=(const SharedHostBuffer&) = delete;

  char* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  // Whether the memory is a registered memfd (false: private memory, or empty).
  bool shared() const { return descriptor_ >= 0; }

 private:
  void release() noexcept;

  char* data_ = nullptr;
  size_t bytes_ = 0;
  size_t mappedBytes_ = 0;  // of the memfd mapping (0 for private memory)
  int descriptor_ = -1;
};

// An array of trivially copyable T in a SharedHostBuffer: the part of std::vector's interface
// the engine's flat buffers use.
template <typename T>
class SharedArray {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  SharedArray() = default;
  explicit SharedArray(size_t count, bool share = true)
      : buffer_(count * sizeof(T), share), count_(count) {}

  // count elements, every one `value` (new memory unless the count is the same).
  void assign(size_t count, T value) {
    if (count != count_) {
      buffer_ = SharedHostBuffer();  // release first: never both at once
      buffer_ = SharedHostBuffer(count * sizeof(T));
      count_ = count;
    }
    for (T& x : *this) x = value;
  }

  T* data() { return reinterpret_cast<T*>(buffer_.data()); }
  const T* data() const { return reinterpret_cast<const T*>(buffer_.data()); }
  size_t size() const { return count_; }
  bool empty() const { return count_ == 0; }
  bool shared() const { return buffer_.shared(); }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }
  T* begin() { return data(); }
  T* end() { return data() + count_; }
  const T* begin() const { return data(); }
  const T* end() const { return data() + count_; }

 private:
  SharedHostBuffer buffer_;
  size_t count_ = 0;
};

}  // namespace ds::comm
