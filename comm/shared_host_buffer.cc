// SharedHostBuffer and its registry (shared_host_buffer.h).
#include "comm/shared_host_buffer.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>

#include "comm/comm_knobs.h"
#include "core/error.h"

namespace ds::comm {
namespace {

struct Registry {
  std::mutex mutex;
  std::map<uintptr_t, SharedRegion> regions;  // by start address; offset unused here
  uint64_t nextId = 1;
  std::atomic<uint64_t> released{0};
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: buffers may outlive static teardown
  return *r;
}

size_t pageBytes() {
  static const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return page;
}

// Read at every allocation (a getenv): cheap next to mapping memory, and tests may change it.
bool mapWanted() { return knobBoolOrDefault(knobs::kCommShmMap); }

// A zeroed memfd of `bytes` mapped shared, or {nullptr, -1} where it cannot be made.
std::pair<char*, int> mapMemfd(size_t bytes) {
  const int fd = ::memfd_create("ds-shared-buffer", MFD_CLOEXEC);
  if (fd < 0) return {nullptr, -1};
  void* p = MAP_FAILED;
  if (::ftruncate(fd, static_cast<off_t>(bytes)) == 0)
    p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    ::close(fd);
    return {nullptr, -1};
  }
  // Huge pages where the host allows them for shared memory (shmem_enabled "advise"), as the
  // allocator's THP policy may give private memory; refused or ignored otherwise.
  ::madvise(p, bytes, MADV_HUGEPAGE);
  return {static_cast<char*>(p), fd};
}

}  // namespace

std::optional<SharedRegion> findSharedRegion(const void* address) {
  const auto at = reinterpret_cast<uintptr_t>(address);
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  auto it = reg.regions.upper_bound(at);
  if (it == reg.regions.begin()) return std::nullopt;
  --it;
  if (at - it->first >= it->second.bytes) return std::nullopt;
  SharedRegion out = it->second;
  out.offset = at - it->first;
  return out;
}

uint64_t sharedRegionsReleased() { return registry().released.load(std::memory_order_acquire); }

SharedHostBuffer::SharedHostBuffer(size_t bytes, bool share) : bytes_(bytes) {
  if (bytes == 0) return;
  const size_t page = pageBytes();
  mappedBytes_ = (bytes + page - 1) / page * page;
  if (share && mapWanted()) std::tie(data_, descriptor_) = mapMemfd(mappedBytes_);
  if (descriptor_ >= 0) {
    struct stat st {};
    ::fstat(descriptor_, &st);
    Registry& reg = registry();
    std::lock_guard<std::mutex> lock(reg.mutex);
    SharedRegion region;
    region.fd = descriptor_;
    region.id = reg.nextId++;
    region.inode = static_cast<uint64_t>(st.st_ino);
    region.device = static_cast<uint64_t>(st.st_dev);
    region.bytes = mappedBytes_;
    reg.regions[reinterpret_cast<uintptr_t>(data_)] = region;
    return;
  }
  // Private memory from the allocator, as a std::vector's would be (the same huge-page policy).
  data_ = static_cast<char*>(std::calloc(1, bytes));
  mappedBytes_ = 0;
  if (!data_) {
    bytes_ = 0;
    throw SystemError("could not allocate " + std::to_string(bytes) + " bytes for a host buffer",
                      ENOMEM);
  }
}

SharedHostBuffer::~SharedHostBuffer() { release(); }

SharedHostBuffer::SharedHostBuffer(SharedHostBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      mappedBytes_(std::exchange(other.mappedBytes_, 0)),
      descriptor_(std::exchange(other.descriptor_, -1)) {}

SharedHostBuffer& SharedHostBuffer::operator=(SharedHostBuffer&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    mappedBytes_ = std::exchange(other.mappedBytes_, 0);
    descriptor_ = std::exchange(other.descriptor_, -1);
  }
  return *this;
}

void SharedHostBuffer::release() noexcept {
  if (descriptor_ >= 0) {
    Registry& reg = registry();
    {
      std::lock_guard<std::mutex> lock(reg.mutex);
      reg.regions.erase(reinterpret_cast<uintptr_t>(data_));
    }
    reg.released.fetch_add(1, std::memory_order_release);
  }
  if (descriptor_ >= 0) {
    ::munmap(data_, mappedBytes_);
    ::close(descriptor_);
  } else {
    std::free(data_);
  }
  data_ = nullptr;
  bytes_ = mappedBytes_ = 0;
  descriptor_ = -1;
}

}  // namespace ds::comm
