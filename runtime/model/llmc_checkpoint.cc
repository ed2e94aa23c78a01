// Reader for llm.c's gpt2_*.bin model files (see LlmcFile in llmc_file.h and loadLlmcCheckpoint in
// model.h). Not a writer and not llm.c's optimizer state (state_*.bin). The payload order is
// Gpt2Model::params() order.
#include <fmt/format.h>

#include <vector>

#include "core/error.h"
#include "runtime/model/gpt2.h"
#include "runtime/model/llmc_file.h"
#include "runtime/model/model.h"
#include "runtime/tensor/bf16_convert.h"

namespace ds::runtime {
namespace {

constexpr int kHeaderInts = 256;
constexpr int kMagic = 20240326;

}  // namespace

LlmcFile::LlmcFile(const std::string& path, const ModelConfig& like)
    : path_(path), file_(std::fopen(path.c_str(), "rb")) {
  if (!file_) throw ConfigError(fmt::format("llm.c checkpoint {}: cannot open", path));
  int32_t h[kHeaderInts];
  if (std::fread(h, sizeof(int32_t), kHeaderInts, file_.get()) != kHeaderInts) {
    throw ConfigError(fmt::format("llm.c checkpoint {}: shorter than the 1024-byte header", path));
  }
  if (h[0] != kMagic) {
    throw ConfigError(
        fmt::format("llm.c checkpoint {}: bad magic {} (expected {}); not a "
                    "gpt2_*.bin model file",
                    path, h[0], kMagic));
  }
  if (h[1] != 3 && h[1] != 5) {
    throw ConfigError(
        fmt::format("llm.c checkpoint {}: version {} unsupported (expected 3 = fp32 "
                    "or 5 = bf16)",
                    path, h[1]));
  }
  ModelConfig c;
  c.kind = "gpt2";
  c.seqLen = h[2];
  c.vocabSize = h[3];
  c.nLayer = h[4];
  c.nHead = h[5];
  c.nEmbd = h[6];
  c.paddedVocab = h[7];
  c.compute = like.compute;
  c.activationCheckpointing = like.activationCheckpointing;
  try {
    (void)makeModel(c);
  } catch (const ConfigError& e) {
    throw ConfigError(
        fmt::format("llm.c checkpoint {}: header describes an invalid model "
                    "(maxT={} V={} L={} NH={} C={} Vp={}): {}",
                    path, h[2], h[3], h[4], h[5], h[6], h[7], e.what()));
  }
  numel_ = Gpt2Model(c).numParamsTotal();
  bf16_ = h[1] == 5;
  const size_t elem = bf16_ ? 2 : 4;
  std::fseek(file_.get(), 0, SEEK_END);
  const long fileBytes = std::ftell(file_.get());
  const size_t want = kHeaderInts * 4 + numel_ * elem;
  if (fileBytes < 0 || static_cast<size_t>(fileBytes) != want) {
    throw ConfigError(
        fmt::format("llm.c checkpoint {}: {} bytes, expected {} (1024-byte header + "
                    "{} params x {} bytes for L={} C={} Vp={} maxT={}){}",
                    path, fileBytes, want, numel_, elem, c.nLayer, c.nEmbd, c.paddedVocab, c.seqLen,
                    static_cast<size_t>(fileBytes) < want ? ": truncated" : ": trailing bytes"));
  }
  cfg_ = c;
}

void LlmcFile::read(size_t offset, size_t count, float* out) const {
  DS_CHECK(offset + count <= numel_, "llm.c checkpoint {}: read of [{}, {}) past {} params", path_,
           offset, offset + count, numel_);
  const size_t elem = bf16_ ? 2 : 4;
  if (std::fseek(file_.get(), long(kHeaderInts * 4 + offset * elem), SEEK_SET) != 0)
    throw ConfigError(fmt::format("llm.c checkpoint {}: seek to param {} failed", path_, offset));
  if (bf16_) {
    std::vector<bf16> tmp(count);
    if (std::fread(tmp.data(), 2, count, file_.get()) != count)
      throw ConfigError(
          fmt::format("llm.c checkpoint {}: read of {} bf16 params failed", path_, count));
    bf16ToF32(out, tmp.data(), count);
  } else if (std::fread(out, 4, count, file_.get()) != count) {
    throw ConfigError(
        fmt::format("llm.c checkpoint {}: read of {} fp32 params failed", path_, count));
  }
}

void loadLlmcCheckpoint(const std::string& path, ModelConfig& cfg, std::vector<float>& flat) {
  LlmcFile file(path, cfg);
  flat.resize(file.numel());
  file.read(0, file.numel(), flat.data());
  cfg = file.header();
}

}  // namespace ds::runtime
