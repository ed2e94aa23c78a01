// AsyncFile: see async_file.h.
#include "zero/async_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "core/env.h"
#include "core/error.h"
#include "core/log.h"

#ifdef DS_HAVE_URING
#include <liburing.h>
#endif

namespace ds::zero {

AlignedBuffer::AlignedBuffer(size_t bytes, bool pin) : bytes_(bytes) {
  if (bytes == 0) return;
  size_t rounded = (bytes + kIoAlign - 1) / kIoAlign * kIoAlign;
  if (posix_memalign(&p_, kIoAlign, rounded) != 0)
    throw SystemError("posix_memalign of " + std::to_string(rounded) + " bytes", ENOMEM);
  std::memset(p_, 0, rounded);
  if (pin) {
    locked_ = mlock(p_, rounded) == 0;
    if (!locked_) DS_LOG_DEBUG("zero", "pin_memory: mlock({} bytes) refused; unpinned", rounded);
  }
}

AlignedBuffer::~AlignedBuffer() {
  if (locked_) munlock(p_, bytes_);
  std::free(p_);
}

AlignedBuffer::AlignedBuffer(AlignedBuffer&& o) noexcept
    : p_(o.p_), bytes_(o.bytes_), locked_(o.locked_) {
  o.p_ = nullptr;
  o.bytes_ = 0;
  o.locked_ = false;
}

AlignedBuffer& AlignedBuffer::operator=(AlignedBuffer&& o) noexcept {
  if (this != &o) {
    this->~AlignedBuffer();
    new (this) AlignedBuffer(std::move(o));
  }
  return *this;
}

struct AsyncFile::Impl {
  std::string path;
  size_t bytes = 0;
  int fd = -1;
  bool direct = false;
  bool uring = false;
  uint64_t next = 1;
  std::map<uint64_t, int> done;  // ticket -> result (bytes or -errno)
  std::map<uint64_t, size_t> expect;
#ifdef DS_HAVE_URING
  io_uring ring{};
#endif
  // Fallback: one worker thread running the queued pread/pwrite in order.
  std::thread worker;
  std::mutex mu;
  std::condition_variable cv;
  struct Op { uint64_t t; bool write; void* buf; size_t n; size_t off; };
  std::deque<Op> queue;
  bool stop = false;

  int runSync(const Op& op) {
    size_t doneBytes = 0;
    while (doneBytes < op.n) {
      ssize_t r = op.write ? pwrite(fd, static_cast<char*>(op.buf) + doneBytes, op.n - doneBytes,
                                    off_t(op.off + doneBytes))
                           : pread(fd, static_cast<char*>(op.buf) + doneBytes, op.n - doneBytes,
                                   off_t(op.off + doneBytes));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return -errno;
      if (r == 0) return -EIO;
      doneBytes += size_t(r);
    }
    return int(doneBytes);
  }

  void workerLoop() {
    std::unique_lock<std::mutex> lk(mu);
    for (;;) {
      cv.wait(lk, [&] { return stop || !queue.empty(); });
      if (queue.empty()) return;
      Op op = queue.front();
      queue.pop_front();
      lk.unlock();
      int r = runSync(op);
      lk.lock();
      done[op.t] = r;
      cv.notify_all();
    }
  }

  uint64_t submit(bool write, void* buf, size_t n, size_t off) {
    DS_CHECK(off + n <= bytes, "{}: I/O [{}, {}) past the file end {}", path, off, off + n, bytes);
    uint64_t t = next++;
    expect[t] = n;
#ifdef DS_HAVE_URING
    if (uring) {
      io_uring_sqe* sqe = io_uring_get_sqe(&ring);
      if (!sqe) {  // queue full: reap one completion first
        reapOne();
        sqe = io_uring_get_sqe(&ring);
      }
      DS_CHECK(sqe != nullptr);
      if (write) io_uring_prep_write(sqe, fd, buf, unsigned(n), off);
      else io_uring_prep_read(sqe, fd, buf, unsigned(n), off);
      io_uring_sqe_set_data64(sqe, t);
      int r = io_uring_submit(&ring);
      if (r < 0) throw SystemError("io_uring_submit on " + path, -r);
      return t;
    }
#endif
    std::lock_guard<std::mutex> lk(mu);
    queue.push_back({t, write, buf, n, off});
    cv.notify_all();
    return t;
  }

#ifdef DS_HAVE_URING
  void reapOne() {
    io_uring_cqe* cqe = nullptr;
    __kernel_timespec ts{};
    ts.tv_sec = defaultTimeout().count() / 1000;
    int r = io_uring_wait_cqe_timeout(&ring, &cqe, &ts);
    if (r == -ETIME)
      throw TimeoutError(fmt::format("nvme swap: no I/O completion on {} within {} ms", path,
                                     defaultTimeout().count()));
    if (r < 0) throw SystemError("io_uring_wait_cqe on " + path, -r);
    done[io_uring_cqe_get_data64(cqe)] = cqe->res;
    io_uring_cqe_seen(&ring, cqe);
  }
#endif

  bool completed(uint64_t t) {
    if (!expect.count(t)) return true;
#ifdef DS_HAVE_URING
    if (uring) {
      io_uring_cqe* cqe = nullptr;
      while (!done.count(t) && io_uring_peek_cqe(&ring, &cqe) == 0 && cqe) {
        done[io_uring_cqe_get_data64(cqe)] = cqe->res;
        io_uring_cqe_seen(&ring, cqe);
      }
      return done.count(t) > 0;
    }
#endif
    std::lock_guard<std::mutex> lk(mu);
    return done.count(t) > 0;
  }

  void wait(uint64_t t) {
    auto it = expect.find(t);
    if (it == expect.end()) return;
    size_t want = it->second;
    int r;
#ifdef DS_HAVE_URING
    if (uring) {
      while (!done.count(t)) reapOne();
      r = done[t];
      done.erase(t);
    } else
#endif
    {
      std::unique_lock<std::mutex> lk(mu);
      if (!cv.wait_for(lk, defaultTimeout(), [&] { return done.count(t) > 0; }))
        throw TimeoutError(fmt::format("nvme swap: I/O on {} not done within {} ms", path,
                                       defaultTimeout().count()));
      r = done[t];
      done.erase(t);
    }
    expect.erase(it);
    if (r < 0) throw SystemError("nvme swap I/O on " + path, -r);
    if (size_t(r) != want)
      throw SystemError(fmt::format("nvme swap: short I/O on {} ({} of {} bytes)", path, r, want),
                        EIO);
  }
};

AsyncFile::AsyncFile(const std::string& path, size_t bytes) : impl_(std::make_unique<Impl>()) {
  DS_CHECK(bytes % kIoAlign == 0, "swap file size {} not a multiple of {}", bytes, kIoAlign);
  impl_->path = path;
  impl_->bytes = bytes;
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_DIRECT | O_CLOEXEC, 0600);
  if (fd >= 0) {
    impl_->direct = true;
  } else if (errno == EINVAL) {
    DS_LOG_INFO("zero", "nvme swap: {} does not allow O_DIRECT; using buffered I/O", path);
    fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  }
  if (fd < 0) throw SystemError("open swap file " + path, errno);
  impl_->fd = fd;
  ::unlink(path.c_str());  // anonymous once open: nothing left behind on a crash
  if (::ftruncate(fd, off_t(bytes)) != 0) {
    int e = errno;
    ::close(fd);
    throw SystemError("ftruncate swap file " + path, e);
  }
#ifdef DS_HAVE_URING
  int r = io_uring_queue_init(64, &impl_->ring, 0);
  if (r == 0) {
    impl_->uring = true;
  } else {
    DS_LOG_INFO("zero", "nvme swap: io_uring unavailable ({}); using a pread/pwrite thread",
                std::strerror(-r));
  }
#endif
  if (!impl_->uring) impl_->worker = std::thread([p = impl_.get()] { p->workerLoop(); });
}

AsyncFile::~AsyncFile() {
  try {
    waitAll();
  } catch (const std::exception& e) {
    DS_LOG_WARN("zero", "nvme swap: pending I/O failed at close: {}", e.what());
  }
  if (impl_->worker.joinable()) {
    {
      std::lock_guard<std::mutex> lk(impl_->mu);
      impl_->stop = true;
    }
    impl_->cv.notify_all();
    impl_->worker.join();
  }
#ifdef DS_HAVE_URING
  if (impl_->uring) io_uring_queue_exit(&impl_->ring);
#endif
  ::close(impl_->fd);
}

uint64_t AsyncFile::readAsync(void* buf, size_t bytes, size_t offset) {
  return impl_->submit(false, buf, bytes, offset);
}
uint64_t AsyncFile::writeAsync(const void* buf, size_t bytes, size_t offset) {
  return impl_->submit(true, const_cast<void*>(buf), bytes, offset);
}
void AsyncFile::wait(uint64_t ticket) { impl_->wait(ticket); }
void AsyncFile::waitAll() {
  while (!impl_->expect.empty()) impl_->wait(impl_->expect.begin()->first);
}
bool AsyncFile::completed(uint64_t ticket) { return impl_->completed(ticket); }
bool AsyncFile::direct() const { return impl_->direct; }
bool AsyncFile::usingUring() const { return impl_->uring; }
const std::string& AsyncFile::path() const { return impl_->path; }
size_t AsyncFile::bytes() const { return impl_->bytes; }

}  // namespace ds::zero
