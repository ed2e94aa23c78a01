// LlmcFile: an open llm.c gpt2_*.bin model file (header validated, size checked) whose payload is
// read by ranges, so a rank can take only its shard of the weights (partitioned construction).
// Not a writer. Invariant: the payload is Gpt2Model::params() order for header(), fp32 or bf16
// (widened on read).
#pragma once

#include <cstdio>
#include <memory>
#include <string>

#include "runtime/model/model.h"

namespace ds::runtime {

class LlmcFile {
 public:
  // ConfigError naming the file and what was expected on a bad magic/version/header or size.
  // compute and activationCheckpointing of header() are taken from `like`.
  LlmcFile(const std::string& path, const ModelConfig& like);
  const ModelConfig& header() const { return cfg_; }
  size_t numel() const { return numel_; }
  // Payload elements [offset, offset + count) (the file's flat space) as fp32.
  void read(size_t offset, size_t count, float* out) const;

 private:
  struct Closer {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  std::string path_;
  std::unique_ptr<std::FILE, Closer> file_;
  ModelConfig cfg_;
  size_t numel_ = 0;
  bool bf16_ = false;
};

}  // namespace ds::runtime
