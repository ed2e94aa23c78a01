// safetensors files: 8-byte little-endian header length N, N bytes of JSON header
// {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {str:
// str}} padded with spaces to a multiple of 8, then the raw little-endian tensor bytes (offsets
// relative to the data start). The writer is durable (DurableWriter); the reader validates every
// entry against the file size and refuses bad files with ConfigError naming the file. Not
// mmap-based.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace ds::runtime::ckpt {

class ReadFile;

struct StTensor {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const void* data = nullptr;  // numel * dtypeSize bytes
};

struct FileDigest {
  uint64_t bytes = 0;
  uint32_t crc32c = 0;
};

// Writes tensors in the given order (data laid out in that order) to path, durably.
FileDigest writeSafetensors(const std::string& path, const std::vector<StTensor>& tensors,
                            const std::map<std::string, std::string>& metadata);

class SafetensorsReader {
 public:
  struct Entry {
    std::string name;
    DType dtype = DType::kF32;
    std::vector<int64_t> shape;
    uint64_t numel = 0;
    uint64_t begin = 0, end = 0;  // absolute file offsets of the raw bytes
  };
  explicit SafetensorsReader(const std::string& path);
  ~SafetensorsReader();
  const std::string& path() const;
  const std::vector<Entry>& entries() const { return entries_; }
  const Entry* find(const std::string& name) const;  // nullptr when absent
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // Elements [first, first + count) of an F32 or BF16 tensor, widened to fp32.
  void readF32(const Entry& e, uint64_t first, size_t count, float* out) const;
  const ReadFile& file() const { return *file_; }

 private:
  std::unique_ptr<ReadFile> file_;
  std::vector<Entry> entries_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace ds::runtime::ckpt
