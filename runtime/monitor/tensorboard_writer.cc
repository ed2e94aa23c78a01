// Hand-encoded tensorflow.Event protos in TFRecord framing; see tensorboard_writer.h.
#include "runtime/monitor/tensorboard_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "core/crc32c.h"
#include "core/error.h"
#include "core/safe_file.h"

namespace ds::runtime {
namespace {

void putVarint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(char((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(char(v));
}

template <typename T>
void putLittle(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));  // x86/ARM little endian: the wire order
  out.append(b, sizeof(T));
}

void putBytesField(std::string& out, int field, const std::string& bytes) {
  putVarint(out, uint64_t(field) << 3 | 2);
  putVarint(out, bytes.size());
  out += bytes;
}

std::string eventHeader(double wallTime, int64_t step) {
  std::string e;
  putVarint(e, 1 << 3 | 1);  // wall_time, fixed64
  putLittle(e, wallTime);
  if (step != 0) {
    putVarint(e, 2 << 3 | 0);  // step, varint
    putVarint(e, uint64_t(step));
  }
  return e;
}

double nowSeconds() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

}  // namespace

std::string encodeScalarEvent(double wallTime, int64_t step, const std::string& tag, float value) {
  std::string v;
  putBytesField(v, 1, tag);  // Summary.Value.tag
  putVarint(v, 2 << 3 | 5);  // Summary.Value.simple_value, fixed32
  putLittle(v, value);
  std::string summary;
  putBytesField(summary, 1, v);  // Summary.value
  std::string e = eventHeader(wallTime, step);
  putBytesField(e, 5, summary);  // Event.summary
  return e;
}

std::string encodeFileVersionEvent(double wallTime) {
  std::string e = eventHeader(wallTime, 0);
  putBytesField(e, 3, "brain.Event:2");
  return e;
}

std::string tfRecord(const std::string& data) {
  std::string r;
  uint64_t len = data.size();
  putLittle(r, len);
  putLittle(r, maskedCrc32c(r.data(), 8));
  r += data;
  putLittle(r, maskedCrc32c(data.data(), data.size()));
  return r;
}

TensorBoardMonitor::TensorBoardMonitor(const MonitorConfig& cfg) {
  std::filesystem::path dir = cfg.outputPath.empty()
                                  ? std::filesystem::path(cfg.jobName)
                                  : std::filesystem::path(cfg.outputPath) / cfg.jobName;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    throw ConfigError(
        fmt::format("tensorboard: cannot create '{}': {}", dir.string(), ec.message()));
  char host[256] = "localhost";
  ::gethostname(host, sizeof(host) - 1);
  double now = nowSeconds();
  path_ = (dir / fmt::format("events.out.tfevents.{:010d}.{}.{}.0", int64_t(now), host, ::getpid()))
              .string();
  // Never through a planted name (core/safe_file); our own leftover is replaced.
  const int fd =
      createFile(path_, O_WRONLY, 0644, ExistingFile::kReplace, "tensorboard event file");
  file_ = ::fdopen(fd, "wb");
  if (!file_) {
    const int err = errno;
    ::close(fd);
    throw SystemError(fmt::format("tensorboard: cannot open '{}'", path_), err);
  }
  append(tfRecord(encodeFileVersionEvent(now)));
  flush();
}

TensorBoardMonitor::~TensorBoardMonitor() {
  if (file_) std::fclose(file_);
}

void TensorBoardMonitor::append(const std::string& record) {
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size())
    throw SystemError(fmt::format("tensorboard: write '{}'", path_), errno);
}

void TensorBoardMonitor::write(const std::vector<MonitorEvent>& events) {
  double now = nowSeconds();
  for (const auto& e : events)
    append(tfRecord(encodeScalarEvent(now, e.step, e.name, float(e.value))));
}

void TensorBoardMonitor::flush() { std::fflush(file_); }

}  // namespace ds::runtime
