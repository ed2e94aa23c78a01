// fuzz-sources: runtime/config/*.cc
// fuzz-libs: -lyaml-cpp
// fuzz-deps: ds_rt_config
// Fuzz harness for the plan reader: YAML plans, DeepSpeed JSON configs (deepspeed_config: file)
// and --set overrides, through the same parsePlan the trainer calls. Input: byte 0 picks the
// mode (bit 0: the text is a ds_config JSON file under a fixed small plan; else a plan YAML),
// then the text, then optionally a NUL and newline-separated --set overrides. Invariants checked:
// nothing crashes or hangs, every refusal is a ConfigError, and an accepted plan satisfies the
// batch triangle (train = micro x gas x world).
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "runtime/config/plan_loader.h"

namespace {

// tmpfs when there is one: each input is a file write and read.
std::filesystem::path scratchParent() {
  std::error_code ec;
  if (std::filesystem::is_directory("/dev/shm", ec)) return "/dev/shm";
  return std::filesystem::temp_directory_path();
}

const std::string& scratchDir() {
  static const std::string& dir = *new std::string([] {  // never destroyed: atexit uses it
    std::string t = (scratchParent() / "dsrun-plan-fuzz-XXXXXX").string();
    if (!::mkdtemp(t.data())) std::abort();
    std::atexit([] { std::filesystem::remove_all(scratchDir()); });
    return t;
  }());
  return dir;
}

std::vector<std::string> splitLines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool json = data[0] & 1;
  const std::string all(reinterpret_cast<const char*>(data + 1), size - 1);
  const size_t nul = all.find('\0');
  const std::string text = all.substr(0, nul);
  const auto sets =
      nul == std::string::npos ? std::vector<std::string>{} : splitLines(all.substr(nul + 1));
  std::string plan = text;
  if (json) {
    std::ofstream(scratchDir() + "/ds.json", std::ios::binary | std::ios::trunc) << text;
    plan =
        "model:\n  gpt: {n_layer: 1, n_head: 2, n_embd: 8, seq_len: 8, vocab_size: 64}\n"
        "deepspeed_config: ds.json\n";
  }
  try {
    ds::runtime::Plan p = ds::runtime::parsePlan(plan, "fuzz.yaml", sets, 2, scratchDir());
    const auto& d = p.deepspeed;
    if (d.trainBatchSize != d.microBatchPerGpu * d.gradientAccumulationSteps * 2) std::abort();
  } catch (const ds::ConfigError&) {
  }
  return 0;
}
