// AsyncFile: see async_file.h.
#include "zero/async_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <thread>

#include "core/env.h"
#include "core/error.h"
#include "core/log.h"
#include "zero/zero_knobs.h"

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
  size_t maxReq = kMaxIoRequest;
  uint64_t next = 1;
  std::atomic<uint64_t> requests{0};

  // One read or write request of at most maxReq bytes, part of ticket t.
  struct Piece { uint64_t t; bool write; char* buf; size_t n; size_t off; };
  // A ticket until waited for: bytes wanted and moved, the first error (-errno), and how many of
  // its pieces are queued or in flight.
  struct Req { size_t want = 0, got = 0; int err = 0; size_t open = 0; bool shortEof = false; };
  std::map<uint64_t, Req> reqs;

#ifdef DS_HAVE_URING
  static constexpr unsigned kDepth = 64;
  io_uring ring{};
  std::deque<Piece> queued;              // pieces not yet submitted
  std::map<uint64_t, Piece> inflight;    // by user_data
  uint64_t nextPiece = 1;
#endif
  // Fallback: one worker thread running the queued tickets in order, piece by piece.
  std::thread worker;
  std::mutex mu;
  std::condition_variable cv;
  struct Op { uint64_t t; bool write; char* buf; size_t n; size_t off; };
  std::deque<Op> queue;
  std::map<uint64_t, Req> finished;  // guarded by mu
  bool stop = false;

  // Fallback: the whole op, at most maxReq bytes per call, retrying short counts; stops at the
  // first error or at end of file (a read returning 0).
  Req runSync(const Op& op) {
    Req r;
    r.want = op.n;
    while (r.got < op.n) {
      const size_t n = std::min(op.n - r.got, maxReq);
      requests.fetch_add(1, std::memory_order_relaxed);
      ssize_t k = op.write ? ::pwrite(fd, op.buf + r.got, n, off_t(op.off + r.got))
                           : ::pread(fd, op.buf + r.got, n, off_t(op.off + r.got));
      if (k < 0 && errno == EINTR) continue;
      if (k < 0) {
        r.err = -errno;
        break;
      }
      if (k == 0) {
        r.shortEof = true;
        break;
      }
      r.got += size_t(k);
    }
    return r;
  }

  void workerLoop() {
    std::unique_lock<std::mutex> lk(mu);
    for (;;) {
      cv.wait(lk, [&] { return stop || !queue.empty(); });
      if (queue.empty()) return;
      Op op = queue.front();
      queue.pop_front();
      lk.unlock();
      Req r = runSync(op);
      lk.lock();
      finished[op.t] = r;
      cv.notify_all();
    }
  }

  uint64_t submit(bool write, void* buf, size_t n, size_t off) {
    DS_CHECK(off + n <= bytes, "{}: I/O [{}, {}) past the file end {}", path, off, off + n, bytes);
    uint64_t t = next++;
    Req& r = reqs[t];
    r.want = n;
    char* p = static_cast<char*>(buf);
    if (n == 0) return t;  // nothing to move: complete at once
#ifdef DS_HAVE_URING
    if (uring) {
      for (size_t d = 0; d < n; d += maxReq) {
        queued.push_back({t, write, p + d, std::min(n - d, maxReq), off + d});
        ++r.open;
      }
      pump();
      return t;
    }
#endif
    r.open = 1;
    std::lock_guard<std::mutex> lk(mu);
    queue.push_back({t, write, p, n, off});
    cv.notify_all();
    return t;
  }

#ifdef DS_HAVE_URING
  // Submits queued pieces while fewer than kDepth are in flight (reaping to make room).
  void pump() {
    while (!queued.empty()) {
      if (inflight.size() >= kDepth) {
        reapOne(true);
        continue;
      }
      io_uring_sqe* sqe = io_uring_get_sqe(&ring);
      if (!sqe) {  // submission queue full: hand what is there to the kernel
        int r = io_uring_submit(&ring);
        if (r < 0) throw SystemError("io_uring_submit on " + path, -r);
        continue;
      }
      Piece pc = queued.front();
      queued.pop_front();
      if (pc.write) io_uring_prep_write(sqe, fd, pc.buf, unsigned(pc.n), pc.off);
      else io_uring_prep_read(sqe, fd, pc.buf, unsigned(pc.n), pc.off);
      const uint64_t id = nextPiece++;
      io_uring_sqe_set_data64(sqe, id);
      inflight.emplace(id, pc);
      requests.fetch_add(1, std::memory_order_relaxed);
      int r = io_uring_submit(&ring);
      if (r < 0) throw SystemError("io_uring_submit on " + path, -r);
    }
  }

  // A piece finished with `res` (bytes or -errno): a short count queues the rest as a new piece.
  void onComplete(uint64_t id, int res) {
    auto it = inflight.find(id);
    if (it == inflight.end()) return;
    Piece pc = it->second;
    inflight.erase(it);
    Req& r = reqs[pc.t];
    if (res < 0) {
      if (res == -EINTR || res == -EAGAIN) {
        queued.push_front(pc);
        return;
      }
      if (!r.err) r.err = res;
    } else if (res == 0 && pc.n > 0) {
      r.shortEof = true;
    } else {
      r.got += size_t(res);
      if (size_t(res) < pc.n && !r.err && !r.shortEof) {
        queued.push_front({pc.t, pc.write, pc.buf + res, pc.n - size_t(res), pc.off + size_t(res)});
        return;  // the piece stays open
      }
    }
    --r.open;
  }

  // Waits (bounded: defaultTimeout) for one completion, or only peeks when !block; false when
  // a peek found none.
  bool reapOne(bool block) {
    io_uring_cqe* cqe = nullptr;
    if (!block) {
      if (io_uring_peek_cqe(&ring, &cqe) != 0 || !cqe) return false;
    } else {
      __kernel_timespec ts{};
      ts.tv_sec = defaultTimeout().count() / 1000;
      ts.tv_nsec = (defaultTimeout().count() % 1000) * 1000000;
      int r = io_uring_wait_cqe_timeout(&ring, &cqe, &ts);
      if (r == -ETIME)
        throw TimeoutError(fmt::format("nvme swap: no I/O completion on {} within {} ms", path,
                                       defaultTimeout().count()));
      if (r < 0) throw SystemError("io_uring_wait_cqe on " + path, -r);
    }
    const uint64_t id = io_uring_cqe_get_data64(cqe);
    const int res = cqe->res;
    io_uring_cqe_seen(&ring, cqe);
    onComplete(id, res);
    return true;
  }
#endif

  bool completed(uint64_t t) {
    auto it = reqs.find(t);
    if (it == reqs.end()) return true;
#ifdef DS_HAVE_URING
    if (uring) {
      while (it->second.open > 0 && reapOne(false)) {
      }
      pump();  // resubmissions of short completions
      return it->second.open == 0;
    }
#endif
    std::lock_guard<std::mutex> lk(mu);
    return finished.count(t) > 0;
  }

  void wait(uint64_t t) {
    auto it = reqs.find(t);
    if (it == reqs.end()) return;
    Req r;
#ifdef DS_HAVE_URING
    if (uring) {
      while (it->second.open > 0) {
        pump();
        if (it->second.open > 0) reapOne(true);
      }
      r = it->second;
    } else
#endif
    if (it->second.open == 0) {
      r = it->second;  // an empty I/O
    } else {
      std::unique_lock<std::mutex> lk(mu);
      if (!cv.wait_for(lk, defaultTimeout(), [&] { return finished.count(t) > 0; }))
        throw TimeoutError(fmt::format("nvme swap: I/O on {} not done within {} ms", path,
                                       defaultTimeout().count()));
      r = finished[t];
      finished.erase(t);
    }
    reqs.erase(it);
    if (r.err < 0) throw SystemError("nvme swap I/O on " + path, -r.err);
    if (r.got != r.want)
      throw SystemError(fmt::format("nvme swap: short I/O on {} ({} of {} bytes{})", path, r.got,
                                    r.want, r.shortEof ? ", end of file" : ""),
                        EIO);
  }
};

AsyncFile::AsyncFile(const std::string& path, size_t bytes) : AsyncFile(path, bytes, Options{}) {}

AsyncFile::AsyncFile(const std::string& path, size_t bytes, Options opts)
    : impl_(std::make_unique<Impl>()) {
  DS_CHECK(bytes % kIoAlign == 0, "swap file size {} not a multiple of {}", bytes, kIoAlign);
  impl_->path = path;
  impl_->bytes = bytes;
  impl_->maxReq = std::max(kIoAlign, std::min(opts.maxRequestBytes, kMaxIoRequest) / kIoAlign * kIoAlign);
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
  const bool allow = opts.allowUring && !knobBoolOrDefault(knobs::kZeroNoUring);
#ifdef DS_HAVE_URING
  if (allow) {
    int r = io_uring_queue_init(Impl::kDepth, &impl_->ring, 0);
    if (r == 0) {
      impl_->uring = true;
    } else {
      DS_LOG_INFO("zero", "nvme swap: io_uring unavailable ({}); using a pread/pwrite thread",
                  std::strerror(-r));
    }
  }
#endif
  if (!allow) DS_LOG_DEBUG("zero", "nvme swap: io_uring disabled; using a pread/pwrite thread");
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
  // every ticket is waited for even when one fails (their buffers must not be freed mid-I/O)
  std::exception_ptr first;
  while (!impl_->reqs.empty()) {
    const uint64_t t = impl_->reqs.begin()->first;
    try {
      impl_->wait(t);
    } catch (...) {
      if (!first) first = std::current_exception();
      if (impl_->reqs.count(t)) break;  // still in flight (a timeout): nothing more to reap
    }
  }
  if (first) std::rethrow_exception(first);
}
bool AsyncFile::completed(uint64_t ticket) { return impl_->completed(ticket); }
bool AsyncFile::direct() const { return impl_->direct; }
bool AsyncFile::usingUring() const { return impl_->uring; }
bool AsyncFile::uringBuilt() {
#ifdef DS_HAVE_URING
  return true;
#else
  return false;
#endif
}
uint64_t AsyncFile::requestsIssued() const { return impl_->requests.load(); }
int AsyncFile::fd() const { return impl_->fd; }
const std::string& AsyncFile::path() const { return impl_->path; }
size_t AsyncFile::bytes() const { return impl_->bytes; }

}  // namespace ds::zero
