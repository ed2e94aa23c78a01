// Durable, atomic file replacement for checkpoints: DurableWriter writes <path>.tmp.<pid>, and
// commit() fsyncs it, renames it over <path> and fsyncs the directory; destroyed uncommitted, it
// unlinks the temp file. The temp file is created through core/safe_file (a symlink or another
// user's file at its name is a ConfigError naming it); a killed save's temp files are removed by
// the next save (removeStaleTemps in checkpoint_save.cc). Also RAII read access (ReadFile: pread
// with errors naming the file). Not buffered I/O for small writes beyond a simple append buffer;
// not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ds::runtime::ckpt {

class DurableWriter {
 public:
  explicit DurableWriter(std::string path);
  ~DurableWriter();
  DurableWriter(const DurableWriter&) = delete;
  DurableWriter& operator=(const DurableWriter&) = delete;
  void write(const void* data, size_t n);  // appends; updates the running CRC-32C
  void commit();                           // fsync, rename, fsync dir
  uint64_t bytes() const { return bytes_; }
  uint32_t crc() const { return crc_; }

 private:
  std::string path_, tmp_;
  int fd_ = -1;
  uint64_t bytes_ = 0;
  uint32_t crc_ = 0;
  bool committed_ = false;
};

// Replaces path's contents with text, durably (DurableWriter).
void writeFileDurable(const std::string& path, const std::string& text);
void fsyncDir(const std::string& dir);
void makeDirs(const std::string& dir);  // mkdir -p; SystemError naming the dir
bool fileExists(const std::string& path);
// Puts directory `fresh` at `target` (an existing directory) and the old one at `fresh`, in one
// atomic renameat2(RENAME_EXCHANGE) where the file system has it, else two renames; then fsyncs
// the parent. SystemError naming both paths on failure.
void swapDirs(const std::string& fresh, const std::string& target);
void removeTree(const std::string& dir);  // rm -r; SystemError naming the dir

class ReadFile {
 public:
  explicit ReadFile(std::string path);  // ConfigError "<path>: cannot open (...)" when missing
  ~ReadFile();
  ReadFile(const ReadFile&) = delete;
  ReadFile& operator=(const ReadFile&) = delete;
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Exactly n bytes at offset; ConfigError naming the file when it is shorter.
  void read(uint64_t offset, void* out, size_t n) const;
  uint32_t crc32c() const;  // of the whole file

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

std::string readTextFile(const std::string& path);  // ConfigError naming the file

}  // namespace ds::runtime::ckpt
