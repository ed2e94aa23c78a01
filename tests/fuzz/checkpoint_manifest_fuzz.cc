// fuzz-sources: runtime/checkpoint/*.cc
// fuzz-deps: ds_rt_checkpoint
// Fuzz harness for the checkpoint reader: a real 2-rank checkpoint (model.safetensors and two
// optimizer files, stage-1 ranges) is saved once into a scratch folder; each input replaces its
// manifest.json, and the reader opens it, checks the parameters and reads the model and every
// optimizer state range the manifest claims, as a resume does. Byte 0 picks the mode: bit 0 set,
// the rest is the manifest's text; clear, the rest is a JSON merge patch (RFC 7386) applied to
// the real manifest (text that is no JSON is written as it is), so mutations start from a valid
// checkpoint. Invariants checked: nothing crashes, every refusal is a ConfigError.
#include <unistd.h>

#include <barrier>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "runtime/checkpoint/checkpoint.h"

namespace {

// tmpfs when there is one: each input is a file write and read.
std::filesystem::path scratchParent() {
  std::error_code ec;
  if (std::filesystem::is_directory("/dev/shm", ec)) return "/dev/shm";
  return std::filesystem::temp_directory_path();
}

using ds::zero::ParamInfo;

const std::vector<ParamInfo> kParams = {
    {"a.w", {3, 4}, 12, {0}, true}, {"a.b", {4}, 4, {0}, false}, {"b.w", {5, 2}, 10, {1}, true}};
constexpr size_t kNumel = 26;

const std::string& root() {
  static const std::string& dir = *new std::string([] {  // never destroyed: atexit uses it
    std::string t = (scratchParent() / "dsrun-ckpt-fuzz-XXXXXX").string();
    if (!::mkdtemp(t.data())) std::abort();
    std::atexit([] { std::filesystem::remove_all(root()); });
    std::vector<float> full(kNumel);
    for (size_t i = 0; i < kNumel; ++i) full[i] = 0.25f * float(i);
    std::barrier sync(2);
    auto rank = [&](int r) {
      const size_t off = r == 0 ? 0 : 13, n = 13;
      ds::runtime::SaveRequest q;
      q.dir = t;
      q.tag = "global_step3";
      q.rank = r;
      q.worldSize = 2;
      q.zeroStage = 1;
      q.step = 3;
      q.planHash = "fuzz";
      q.params = &kParams;
      q.fullParams = r == 0 ? full.data() : nullptr;
      for (const char* s : {"fp32", "exp_avg", "exp_avg_sq"})
        q.optimizer.push_back({s, off, n, full.data() + off});
      q.clientState = r == 0 ? R"({"scaler": {"cur_scale": 1}})" : "";
      q.barrier = [&] { sync.arrive_and_wait(); };
      ds::runtime::saveCheckpoint(q);
    };
    std::thread other(rank, 1);
    rank(0);
    other.join();
    return t;
  }());
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string manifest = root() + "/global_step3/manifest.json";
  static const std::string original = [] {
    std::ifstream in(manifest, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }();
  if (size == 0) return 0;
  std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  if (!(data[0] & 1)) {
    auto patch = nlohmann::json::parse(text, nullptr, false);
    if (!patch.is_discarded()) {
      auto m = nlohmann::json::parse(original);
      m.merge_patch(patch);
      text = m.dump(2);
    }
  }
  std::ofstream(manifest, std::ios::binary | std::ios::trunc) << text;
  try {
    auto reader = ds::runtime::CheckpointReader::open(root(), "global_step3");
    std::vector<float> flat(kNumel);
    reader->readModel(kParams, flat.data());
    for (const auto& s : reader->stateNames()) reader->readRange(0, kNumel, s, flat.data());
    reader->readRange(5, 3, "fp32", flat.data());
  } catch (const ds::ConfigError&) {
  }
  return 0;
}
