// Reader for llm.c's gpt2_*.bin model files (see loadLlmcCheckpoint in model.h). Not a writer and
// not llm.c's optimizer state (state_*.bin). The payload order is Gpt2Model::params() order.
#include <cstdio>
#include <memory>

#include <fmt/format.h>

#include "core/error.h"
#include "runtime/model/gpt2.h"
#include "runtime/model/model.h"
#include "runtime/tensor/bf16_convert.h"

namespace ds::runtime {
namespace {

constexpr int kHeaderInts = 256;
constexpr int kMagic = 20240326;

struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};

}  // namespace

void loadLlmcCheckpoint(const std::string& path, ModelConfig& cfg, std::vector<float>& flat) {
  std::unique_ptr<FILE, FileCloser> f(std::fopen(path.c_str(), "rb"));
  if (!f) throw ConfigError(fmt::format("llm.c checkpoint {}: cannot open", path));
  int32_t h[kHeaderInts];
  if (std::fread(h, sizeof(int32_t), kHeaderInts, f.get()) != kHeaderInts) {
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
  c.compute = cfg.compute;
  c.activationCheckpointing = cfg.activationCheckpointing;
  try {
    (void)makeModel(c);
  } catch (const ConfigError& e) {
    throw ConfigError(
        fmt::format("llm.c checkpoint {}: header describes an invalid model "
                    "(maxT={} V={} L={} NH={} C={} Vp={}): {}",
                    path, h[2], h[3], h[4], h[5], h[6], h[7], e.what()));
  }
  Gpt2Model model(c);
  const size_t n = model.numParamsTotal();
  const bool bf = h[1] == 5;
  const size_t elem = bf ? 2 : 4;
  std::fseek(f.get(), 0, SEEK_END);
  const long fileBytes = std::ftell(f.get());
  const size_t want = kHeaderInts * 4 + n * elem;
  if (fileBytes < 0 || static_cast<size_t>(fileBytes) != want) {
    throw ConfigError(
        fmt::format("llm.c checkpoint {}: {} bytes, expected {} (1024-byte header + "
                    "{} params x {} bytes for L={} C={} Vp={} maxT={}){}",
                    path, fileBytes, want, n, elem, c.nLayer, c.nEmbd, c.paddedVocab, c.seqLen,
                    static_cast<size_t>(fileBytes) < want ? ": truncated" : ": trailing bytes"));
  }
  std::fseek(f.get(), kHeaderInts * 4, SEEK_SET);
  flat.resize(n);
  if (bf) {
    std::vector<bf16> tmp(n);
    if (std::fread(tmp.data(), 2, n, f.get()) != n) {
      throw ConfigError(fmt::format("llm.c checkpoint {}: read of {} bf16 params failed", path, n));
    }
    bf16ToF32(flat.data(), tmp.data(), n);
  } else if (std::fread(flat.data(), 4, n, f.get()) != n) {
    throw ConfigError(fmt::format("llm.c checkpoint {}: read of {} fp32 params failed", path, n));
  }
  cfg = c;
}

}  // namespace ds::runtime
