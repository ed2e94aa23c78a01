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
#include "core/safe_file.h"
#include "zero/zero_knobs.h"

#ifdef DS_HAVE_URING
#include <liburing.h>
#endif

namespace ds::zero {
namespace {
std::atomic<uint64_t> totalBytesRead{0}, totalBytesWritten{0};
}  // namespace

SwapIoTotals swapIoTotals() { return {totalBytesRead.load(), totalBytesWritten.load()}; }

AlignedBuffer::AlignedBuffer(size_t bytes, bool pin) : bytes_(bytes) {
  if (bytes == 0) return;
  size_t rounded = (bytes + kIoAlign - 1) / kIoAlign * kIoAlign;
  if (posix_memalign(&data_, kIoAlign, rounded) != 0)
    throw SystemError("posix_memalign of " + std::to_string(rounded) + " bytes", ENOMEM);
  std::memset(data_, 0, rounded);
  if (pin) {
    locked_ = mlock(data_, rounded) == 0;
    if (!locked_) DS_LOG_DEBUG("zero", "pin_memory: mlock({} bytes) refused; unpinned", rounded);
  }
}

AlignedBuffer::~AlignedBuffer() {
  if (locked_) munlock(data_, bytes_);
  std::free(data_);
}

AlignedBuffer::AlignedBuffer(AlignedBuffer&& other) noexcept
    : data_(other.data_), bytes_(other.bytes_), locked_(other.locked_) {
  other.data_ = nullptr;
  other.bytes_ = 0;
  other.locked_ = false;
}

AlignedBuffer& AlignedBuffer::operator=(AlignedBuffer&& other) noexcept {
  if (this != &other) {
    this->~AlignedBuffer();
    new (this) AlignedBuffer(std::move(other));
  }
  return *this;
}

struct AsyncFile::Impl {
  std::string path;
  size_t bytes = 0;
  int descriptor = -1;
  bool direct = false;
  bool uring = false;
  size_t maxReq = kMaxIoRequest;
  uint64_t next = 1;
  std::atomic<uint64_t> requests{0};

  // One read or write request of at most maxReq bytes, part of ticket t.
  struct Piece {
    uint64_t ticket;
    bool write;
    char* buf;
    size_t size;
    size_t offset;
  };
  // A ticket until waited for: bytes wanted and moved, the first error (-errno), and how many of
  // its pieces are queued or in flight.
  struct Req {
    size_t want = 0, got = 0;
    int err = 0;
    size_t open = 0;
    bool shortEof = false;
  };
  std::map<uint64_t, Req> reqs;

#ifdef DS_HAVE_URING
  unsigned depth = 64;  // requests in flight (Options::queueDepth)
  io_uring ring{};
  std::deque<Piece> queued;            // pieces not yet submitted
  std::map<uint64_t, Piece> inflight;  // by user_data
  uint64_t nextPiece = 1;
#endif
  // Fallback: one worker thread running the queued tickets in order, piece by piece.
  std::thread worker;
  std::mutex mutex;
  std::condition_variable wakeup;
  struct Op {
    uint64_t ticket;
    bool write;
    char* buf;
    size_t size;
    size_t offset;
  };
  std::deque<Op> queue;
  std::map<uint64_t, Req> finished;  // guarded by mu
  bool stop = false;

  // Fallback: the whole op, at most maxReq bytes per call, retrying short counts; stops at the
  // first error or at end of file (a read returning 0).
  Req runSync(const Op& task) {
    Req result;
    result.want = task.size;
    while (result.got < task.size) {
      const size_t chunk = std::min(task.size - result.got, maxReq);
      requests.fetch_add(1, std::memory_order_relaxed);
      ssize_t moved =
          task.write
              ? ::pwrite(descriptor, task.buf + result.got, chunk, off_t(task.offset + result.got))
              : ::pread(descriptor, task.buf + result.got, chunk, off_t(task.offset + result.got));
      if (moved < 0 && errno == EINTR) continue;
      if (moved < 0) {
        result.err = -errno;
        break;
      }
      if (moved == 0) {
        result.shortEof = true;
        break;
      }
      result.got += size_t(moved);
    }
    return result;
  }

  void workerLoop() {
    std::unique_lock<std::mutex> lock(mutex);
    for (;;) {
      wakeup.wait(lock, [&] { return stop || !queue.empty(); });
      if (queue.empty()) return;
      Op task = queue.front();
      queue.pop_front();
      lock.unlock();
      Req result = runSync(task);
      lock.lock();
      finished[task.ticket] = result;
      wakeup.notify_all();
    }
  }

  uint64_t submit(bool write, void* buf, size_t count, size_t off) {
    DS_CHECK(off + count <= bytes, "{}: I/O [{}, {}) past the file end {}", path, off, off + count,
             bytes);
    (write ? totalBytesWritten : totalBytesRead).fetch_add(count, std::memory_order_relaxed);
    uint64_t ticket = next++;
    Req& req = reqs[ticket];
    req.want = count;
    char* bytesAt = static_cast<char*>(buf);
    if (count == 0) return ticket;  // nothing to move: complete at once
#ifdef DS_HAVE_URING
    if (uring) {
      for (size_t done = 0; done < count; done += maxReq) {
        queued.push_back(
            {ticket, write, bytesAt + done, std::min(count - done, maxReq), off + done});
        ++req.open;
      }
      pump();
      return ticket;
    }
#endif
    req.open = 1;
    std::lock_guard<std::mutex> lock(mutex);
    queue.push_back({ticket, write, bytesAt, count, off});
    wakeup.notify_all();
    return ticket;
  }

#ifdef DS_HAVE_URING
  // Submits queued pieces while fewer than `depth` are in flight (reaping to make room).
  void pump() {
    while (!queued.empty()) {
      if (inflight.size() >= depth) {
        reapOne(true);
        continue;
      }
      io_uring_sqe* sqe = io_uring_get_sqe(&ring);
      if (!sqe) {  // submission queue full: hand what is there to the kernel
        int status = io_uring_submit(&ring);
        if (status < 0) throw SystemError("io_uring_submit on " + path, -status);
        continue;
      }
      Piece piece = queued.front();
      queued.pop_front();
      if (piece.write)
        io_uring_prep_write(sqe, descriptor, piece.buf, unsigned(piece.size), piece.offset);
      else io_uring_prep_read(sqe, descriptor, piece.buf, unsigned(piece.size), piece.offset);
      const uint64_t pieceId = nextPiece++;
      io_uring_sqe_set_data64(sqe, pieceId);
      inflight.emplace(pieceId, piece);
      requests.fetch_add(1, std::memory_order_relaxed);
      int status = io_uring_submit(&ring);
      if (status < 0) throw SystemError("io_uring_submit on " + path, -status);
    }
  }

  // A piece finished with `res` (bytes or -errno): a short count queues the rest as a new piece.
  void onComplete(uint64_t pieceId, int res) {
    auto found = inflight.find(pieceId);
    if (found == inflight.end()) return;
    Piece piece = found->second;
    inflight.erase(found);
    Req& req = reqs[piece.ticket];
    if (res < 0) {
      if (res == -EINTR || res == -EAGAIN) {
        queued.push_front(piece);
        return;
      }
      if (!req.err) req.err = res;
    } else if (res == 0 && piece.size > 0) {
      req.shortEof = true;
    } else {
      req.got += size_t(res);
      if (size_t(res) < piece.size && !req.err && !req.shortEof) {
        queued.push_front({piece.ticket, piece.write, piece.buf + res, piece.size - size_t(res),
                           piece.offset + size_t(res)});
        return;  // the piece stays open
      }
    }
    --req.open;
  }

  // Waits (bounded: defaultTimeout) for one completion, or only peeks when !block; false when
  // a peek found none.
  bool reapOne(bool block) {
    io_uring_cqe* cqe = nullptr;
    if (!block) {
      if (io_uring_peek_cqe(&ring, &cqe) != 0 || !cqe) return false;
    } else {
      __kernel_timespec timeout{};
      timeout.tv_sec = defaultTimeout().count() / 1000;
      timeout.tv_nsec = (defaultTimeout().count() % 1000) * 1000000;
      int status = io_uring_wait_cqe_timeout(&ring, &cqe, &timeout);
      if (status == -ETIME)
        throw TimeoutError(fmt::format("nvme swap: no I/O completion on {} within {} ms", path,
                                       defaultTimeout().count()));
      if (status < 0) throw SystemError("io_uring_wait_cqe on " + path, -status);
    }
    const uint64_t pieceId = io_uring_cqe_get_data64(cqe);
    const int res = cqe->res;
    io_uring_cqe_seen(&ring, cqe);
    onComplete(pieceId, res);
    return true;
  }
#endif

  bool completed(uint64_t ticket) {
    auto found = reqs.find(ticket);
    if (found == reqs.end()) return true;
#ifdef DS_HAVE_URING
    if (uring) {
      while (found->second.open > 0 && reapOne(false)) {
      }
      pump();  // resubmissions of short completions
      return found->second.open == 0;
    }
#endif
    std::lock_guard<std::mutex> lock(mutex);
    return finished.count(ticket) > 0;
  }

  void wait(uint64_t ticket) {
    auto found = reqs.find(ticket);
    if (found == reqs.end()) return;
    Req req;
#ifdef DS_HAVE_URING
    if (uring) {
      while (found->second.open > 0) {
        pump();
        if (found->second.open > 0) reapOne(true);
      }
      req = found->second;
    } else
#endif
        if (found->second.open == 0) {
      req = found->second;  // an empty I/O
    } else {
      std::unique_lock<std::mutex> lock(mutex);
      if (!wakeup.wait_for(lock, defaultTimeout(), [&] { return finished.count(ticket) > 0; }))
        throw TimeoutError(fmt::format("nvme swap: I/O on {} not done within {} ms", path,
                                       defaultTimeout().count()));
      req = finished[ticket];
      finished.erase(ticket);
    }
    reqs.erase(found);
    if (req.err < 0) throw SystemError("nvme swap I/O on " + path, -req.err);
    if (req.got != req.want)
      throw SystemError(fmt::format("nvme swap: short I/O on {} ({} of {} bytes{})", path, req.got,
                                    req.want, req.shortEof ? ", end of file" : ""),
                        EIO);
  }
};

AsyncFile::AsyncFile(const std::string& path, size_t bytes) : AsyncFile(path, bytes, Options{}) {}

namespace {

// Creates the swap file afresh with O_DIRECT where the filesystem allows it; *direct tells which.
// Never through a planted name: a symlink, FIFO or another user's file there is refused
// (ConfigError naming the path); our own leftover (a killed run's, pid reused) is replaced.
int openSwapFile(const std::string& path, bool* direct) {
  const std::string what = "nvme swap file";
  try {
    *direct = true;
    return createFile(path, O_RDWR | O_DIRECT, 0600, ExistingFile::kReplace, what);
  } catch (const SystemError& e) {
    if (e.code() != EINVAL) throw;
  }
  DS_LOG_INFO("zero", "nvme swap: {} does not allow O_DIRECT; using buffered I/O", path);
  *direct = false;
  return createFile(path, O_RDWR, 0600, ExistingFile::kReplace, what);
}

}  // namespace

AsyncFile::AsyncFile(const std::string& path, size_t bytes, Options opts)
    : impl_(std::make_unique<Impl>()) {
  DS_CHECK(bytes % kIoAlign == 0, "swap file size {} not a multiple of {}", bytes, kIoAlign);
  impl_->path = path;
  impl_->bytes = bytes;
  impl_->maxReq =
      std::max(kIoAlign, std::min(opts.maxRequestBytes, kMaxIoRequest) / kIoAlign * kIoAlign);
#ifdef DS_HAVE_URING
  impl_->depth = std::clamp(opts.queueDepth, 1u, 4096u);
#endif
  const int descriptor = openSwapFile(path, &impl_->direct);
  impl_->descriptor = descriptor;
  ::unlink(path.c_str());  // anonymous once open: nothing left behind on a crash
  if (::ftruncate(descriptor, off_t(bytes)) != 0) {
    const int savedErrno = errno;
    ::close(descriptor);
    throw SystemError("ftruncate swap file " + path, savedErrno);
  }
  startIo(opts.allowUring && !knobBoolOrDefault(knobs::kZeroNoUring));
}

// io_uring when allowed and available, else the pread/pwrite worker thread.
void AsyncFile::startIo(bool allowUring) {
#ifdef DS_HAVE_URING
  if (allowUring) {
    const int status = io_uring_queue_init(impl_->depth, &impl_->ring, 0);
    if (status == 0) {
      impl_->uring = true;
    } else {
      DS_LOG_INFO("zero", "nvme swap: io_uring unavailable ({}); using a pread/pwrite thread",
                  std::strerror(-status));
    }
  }
#endif
  if (!allowUring)
    DS_LOG_DEBUG("zero", "nvme swap: io_uring disabled; using a pread/pwrite thread");
  if (!impl_->uring) impl_->worker = std::thread([self = impl_.get()] { self->workerLoop(); });
}

AsyncFile::~AsyncFile() {
  try {
    waitAll();
  } catch (const std::exception& e) {
    DS_LOG_WARN("zero", "nvme swap: pending I/O failed at close: {}", e.what());
  }
  if (impl_->worker.joinable()) {
    {
      std::lock_guard<std::mutex> lock(impl_->mutex);
      impl_->stop = true;
    }
    impl_->wakeup.notify_all();
    impl_->worker.join();
  }
#ifdef DS_HAVE_URING
  if (impl_->uring) io_uring_queue_exit(&impl_->ring);
#endif
  ::close(impl_->descriptor);
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
    const uint64_t ticket = impl_->reqs.begin()->first;
    try {
      impl_->wait(ticket);
    } catch (...) {
      if (!first) first = std::current_exception();
      if (impl_->reqs.count(ticket)) break;  // still in flight (a timeout): nothing more to reap
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
int AsyncFile::fd() const { return impl_->descriptor; }
const std::string& AsyncFile::path() const { return impl_->path; }
size_t AsyncFile::bytes() const { return impl_->bytes; }

}  // namespace ds::zero
