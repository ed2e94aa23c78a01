// Checkpoints on real files: save/load round trip, `latest` only after all ranks (threads with a
// real barrier), loading across world sizes and ZeRO stages (real ZeroEngine + GPT-2: resuming
// continues the same fp32 loss trajectory bit for bit), the consolidated export parsed by an
// independent python3 reader, and every refusal with its error text.
#include <catch2/catch.hpp>

#include <barrier>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/safetensors.h"
#include "runtime/checkpoint/zero_ranges.h"
#include "runtime/model/model.h"
#include "tests/support/skip.h"
#include "tests/support/spawn_ranks.h"
#include "zero/partition.h"
#include "zero/zero_engine.h"

using Catch::Matchers::Contains;
using ds::runtime::CheckpointReader;
using ds::runtime::OptimRange;
using ds::runtime::SaveRequest;
namespace fs = std::filesystem;

namespace {

std::vector<ds::zero::ParamInfo> toyParams() {
  return {{"a.w", {3, 4}, 12, {0}, true},
          {"a.b", {4}, 4, {0}, false},
          {"b.w", {5, 7}, 35, {1}, true},
          {"b.b", {5}, 5, {1}, false}};
}
constexpr size_t kToyNumel = 12 + 4 + 35 + 5;

// Global "optimizer state" value of state s at flat index i: distinct per (s, i).
float stateValue(int s, size_t i) { return float(s) * 1000.0f + float(i) * 0.5f; }
const char* const kStates[3] = {"fp32", "exp_avg", "exp_avg_sq"};

// Saves a checkpoint of the synthetic state as `world` ranks (threads, std::barrier), each rank
// owning its stage-1/2 flat partition slice or, for stage 3, its per-parameter chunks.
void saveSynthetic(const std::string& dir, const std::string& tag, int world, int stage,
                   int64_t step = 7, bool withModel = true) {
  auto params = toyParams();
  std::vector<float> full(kToyNumel);
  for (size_t i = 0; i < kToyNumel; ++i) full[i] = stateValue(0, i);
  std::barrier sync(world);
  ds::test::runRanks(world, [&](int r) {
    std::vector<std::pair<size_t, size_t>> mine;  // (offset, size) in the flat space; empty
                                                  // stage-3 chunks included, as the engine may
    if (stage < 3) {
      ds::zero::FlatLayout fl(kToyNumel, world);
      auto s = fl.realShard(r);
      if (s.size > 0) mine.push_back({s.offset, s.size});
    } else {
      ds::zero::Stage3Layout l3(params, world);
      auto offs = ds::zero::paramOffsets(params);
      for (size_t p = 0; p < params.size(); ++p) {
        auto s = l3.ownRange(p, r);
        mine.push_back({offs[p] + s.offset, s.size});
      }
    }
    std::vector<std::vector<float>> data;
    SaveRequest q;
    for (int st = 0; st < 3; ++st) {
      for (auto [o, n] : mine) {
        data.emplace_back(n);
        for (size_t i = 0; i < n; ++i) data.back()[i] = stateValue(st, o + i);
      }
    }
    size_t k = 0;
    for (int st = 0; st < 3; ++st)
      for (auto [o, n] : mine) q.optimizer.push_back({kStates[st], o, n, data[k++].data()});
    q.dir = dir;
    q.tag = tag;
    q.rank = r;
    q.worldSize = world;
    q.zeroStage = stage;
    q.step = step;
    q.planHash = "abc123";
    q.params = &params;
    q.fullParams = r == 0 && withModel ? full.data() : nullptr;
    q.clientState = r == 0 ? R"({"lr_scheduler": {"last": 7}})" : "";
    q.barrier = [&] { sync.arrive_and_wait(); };
    ds::runtime::saveCheckpoint(q);
  });
}

std::string errorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const ds::Error& e) {
    return e.what();
  }
  return "(no error)";
}

void flipByte(const std::string& path, uint64_t at) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(at));
  char c;
  f.read(&c, 1);
  c ^= 0x5a;
  f.seekp(static_cast<std::streamoff>(at));
  f.write(&c, 1);
}

}  // namespace

TEST_CASE("checkpoint round trip: manifest, model, ranges, latest, no temp files", "[multirank]") {
  ds::test::TempDir dir;
  saveSynthetic(dir.path(), "global_step7", 2, 1);
  REQUIRE(ds::runtime::readLatestTag(dir.path()) == "global_step7");
  auto r = CheckpointReader::open(dir.path());
  const auto& info = r->info();
  REQUIRE(info.tag == "global_step7");
  REQUIRE(info.step == 7);
  REQUIRE(info.worldSize == 2);
  REQUIRE(info.zeroStage == 1);
  REQUIRE(info.planHash == "abc123");
  REQUIRE(nlohmann::json::parse(info.clientState)["lr_scheduler"]["last"] == 7);
  REQUIRE(info.params.size() == 4);
  REQUIRE(info.params[2].shape == std::vector<int64_t>{5, 7});
  std::vector<float> flat(kToyNumel);
  r->readModel(toyParams(), flat.data());
  for (size_t i = 0; i < kToyNumel; ++i) REQUIRE(flat[i] == stateValue(0, i));
  REQUIRE(r->stateNames() == std::vector<std::string>{"exp_avg", "exp_avg_sq", "fp32"});
  for (const auto& e : fs::directory_iterator(dir.path() + "/global_step7")) {
    INFO(e.path());
    REQUIRE(e.path().string().find(".tmp.") == std::string::npos);
  }
  // Re-saving the tag that latest names (a resumed run reaching the same step) rebuilds it beside
  // the old copy and swaps it in: the result is complete, with the new layout, and no staging
  // directory is left.
  saveSynthetic(dir.path(), "global_step7", 3, 3);
  REQUIRE(CheckpointReader::open(dir.path())->info().worldSize == 3);
  REQUIRE_FALSE(fs::exists(dir.path() + "/global_step7.saving"));
  REQUIRE(fs::exists(dir.path() + "/global_step7/optim_rank_00002.safetensors"));
  // A second save moves latest; the first stays loadable by tag.
  saveSynthetic(dir.path(), "global_step9", 2, 1, 9);
  REQUIRE(ds::runtime::readLatestTag(dir.path()) == "global_step9");
  REQUIRE(CheckpointReader::open(dir.path(), "global_step7")->info().step == 7);
}

TEST_CASE("optimizer ranges load across world sizes and ZeRO stages", "[multirank]") {
  struct Save {
    int world, stage;
  };
  for (Save s : {Save{1, 0}, Save{2, 1}, Save{3, 2}, Save{4, 3}, Save{2, 3}}) {
    ds::test::TempDir dir;
    saveSynthetic(dir.path(), "t", s.world, s.stage);
    auto r = CheckpointReader::open(dir.path());
    auto read = r->rangeReader();
    // Any reader layout: stage 1/2 slices at 3 ranks, stage 3 per-parameter chunks at 2 ranks,
    // and odd ranges crossing rank boundaries.
    for (auto [o, n] : std::vector<std::pair<size_t, size_t>>{
             {0, kToyNumel}, {0, 19}, {19, 19}, {38, 18}, {13, 30}, {55, 1}}) {
      for (int st = 0; st < 3; ++st) {
        std::vector<float> out(n, -1.0f);
        read(o, n, kStates[st], out.data());
        INFO("saved world " << s.world << " stage " << s.stage << " range " << o << "+" << n);
        for (size_t i = 0; i < n; ++i) REQUIRE(out[i] == stateValue(st, o + i));
      }
    }
  }
}

namespace {

// GPT-2 tiny, one rank, driven by a real ZeroEngine; returns the loss of each step.
struct GptRun {
  std::unique_ptr<ds::runtime::Model> model;
  std::unique_ptr<ds::zero::ZeroEngine> eng;
  GptRun(int stage) {
    ds::runtime::ModelConfig c;
    c.nLayer = 2;
    c.nHead = 2;
    c.nEmbd = 8;
    c.seqLen = 8;
    c.vocabSize = 13;
    model = ds::runtime::makeModel(c);
    ds::zero::ZeroOptions z;
    z.stage = stage;
    z.paramPersistenceThreshold = 8;
    ds::zero::OptimizerOptions o;
    o.weightDecay = 0.01f;
    eng =
        std::make_unique<ds::zero::ZeroEngine>(model->params(), model->numBlocks(), nullptr, z, o);
  }
  float step(int s) {
    std::vector<int32_t> in(16), tg(16);
    for (int i = 0; i < 16; ++i) {
      in[i] = (s * 5 + i * 3) % 13;
      tg[i] = (s * 5 + i * 3 + 1) % 13;
    }
    eng->beginStep(true);
    float loss = model->forward(in.data(), tg.data(), 2, 8, eng->table(), *eng);
    model->backward(1.0f, eng->table(), *eng);
    eng->step(1e-2f, 1.0f, 1.0f);
    return loss;
  }
};

void saveEngine(GptRun& g, const std::string& dir, const std::string& tag, int stage) {
  std::vector<float> full(g.eng->numel());
  g.eng->getParams(full.data());
  auto shard = g.eng->optimizerShard();
  SaveRequest q;
  q.optimizer = ds::runtime::optimRanges(shard);
  q.dir = dir;
  q.tag = tag;
  q.zeroStage = stage;
  q.step = g.eng->stepCount();
  q.params = &g.model->params();
  q.fullParams = full.data();
  ds::runtime::saveCheckpoint(q);
}

}  // namespace

TEST_CASE(
    "resume from a checkpoint continues the same fp32 loss trajectory bitwise, across "
    "stages",
    "[unit]") {
  ds::test::TempDir dir;
  for (int saveStage : {0, 1}) {
    GptRun a(saveStage);
    std::vector<float> init(a.eng->numel());
    a.model->initParams(init.data(), 42);
    a.eng->setParams(init.data());
    for (int s = 0; s < 3; ++s) a.step(s);
    saveEngine(a, dir.path(), "s" + std::to_string(saveStage), saveStage);
    std::vector<float> cont;
    for (int s = 3; s < 6; ++s) cont.push_back(a.step(s));
    for (int loadStage : {saveStage, 3}) {
      GptRun b(loadStage);
      auto r = CheckpointReader::open(dir.path());
      std::vector<float> flat(b.eng->numel());
      r->readModel(b.model->params(), flat.data());
      b.eng->setParams(flat.data());
      b.eng->loadOptimizerState(r->rangeReader(), r->info().step);
      REQUIRE(b.eng->stepCount() == 3);
      std::vector<float> resumed;
      for (int s = 3; s < 6; ++s) resumed.push_back(b.step(s));
      INFO("saved at stage " << saveStage << ", resumed at stage " << loadStage);
      REQUIRE(resumed == cont);
    }
  }
}

TEST_CASE("without a model file the parameters come from the fp32 master ranges", "[multirank]") {
  ds::test::TempDir dir;
  saveSynthetic(dir.path(), "t", 3, 3, 7, /*withModel=*/false);
  REQUIRE_FALSE(fs::exists(dir.path() + "/t/model.safetensors"));
  std::vector<float> flat(kToyNumel);
  CheckpointReader::open(dir.path())->readModel(toyParams(), flat.data());
  for (size_t i = 0; i < kToyNumel; ++i) REQUIRE(flat[i] == stateValue(0, i));
}

TEST_CASE("consolidated export is a plain fp32 safetensors file", "[multirank]") {
  ds::test::TempDir dir;
  saveSynthetic(dir.path(), "g", 3, 3);
  const std::string out = dir.file("model_fp32.safetensors");
  ds::runtime::exportConsolidated(dir.path(), "g", out);
  ds::runtime::ckpt::SafetensorsReader st(out);
  REQUIRE(st.entries().size() == 4);
  REQUIRE(st.metadata().at("step") == "7");
  const auto* bw = st.find("b.w");
  REQUIRE(bw != nullptr);
  REQUIRE(bw->shape == std::vector<int64_t>{5, 7});
  std::vector<float> v(35);
  st.readF32(*bw, 0, 35, v.data());
  for (size_t i = 0; i < 35; ++i) REQUIRE(v[i] == stateValue(0, 16 + i));
}

TEST_CASE("consolidated export parses with an independent reader (python3)", "[multirank]") {
  if (ds::test::runCommand("command -v python3 >/dev/null", nullptr) != 0)
    DS_SKIP("python3 not found (apt-get install python3)");
  ds::test::TempDir dir;
  saveSynthetic(dir.path(), "g", 3, 3);
  const std::string out = dir.file("model_fp32.safetensors");
  ds::runtime::exportConsolidated(dir.path(), "g", out);
  // An independent reader: only the standard library's json and struct.
  ds::test::writeFile(dir.file("read.py"), R"PY(
import json, struct, sys
data = open(sys.argv[1], 'rb').read()
(n,) = struct.unpack('<Q', data[:8])
header = json.loads(data[8:8 + n])
meta = header.pop('__metadata__', {})
base = 8 + n
for name in sorted(header):
    t = header[name]
    assert t['dtype'] == 'F32', t
    b, e = t['data_offsets']
    count = (e - b) // 4
    numel = 1
    for d in t['shape']:
        numel *= d
    assert numel == count, (name, numel, count)
    vals = struct.unpack('<%df' % count, data[base + b:base + e])
    print('%s %s %d %.1f' % (name, 'x'.join(map(str, t['shape'])), count, sum(vals)))
print('step', meta.get('step'))
)PY");
  std::string text;
  REQUIRE(ds::test::runCommand("python3 " + dir.file("read.py") + " " + out, &text) == 0);
  // Sums of stateValue(0, i) = 0.5 * i over each tensor's flat range.
  auto sum = [](size_t a, size_t n) {
    double s = 0;
    for (size_t i = a; i < a + n; ++i) s += 0.5 * static_cast<double>(i);
    return s;
  };
  char want[256];
  std::snprintf(want, sizeof(want),
                "a.b 4 4 %.1f\na.w 3x4 12 %.1f\nb.b 5 5 %.1f\nb.w 5x7 35 %.1f\nstep 7\n",
                sum(12, 4), sum(0, 12), sum(51, 5), sum(16, 35));
  REQUIRE(text == want);
}

TEST_CASE("corrupt, truncated and incomplete checkpoints are refused naming the file",
          "[multirank]") {
  ds::test::TempDir dir;
  const std::string tagDir = dir.path() + "/t";
  const std::string opt1 = tagDir + "/optim_rank_00001.safetensors";
  auto open = [&] { CheckpointReader::open(dir.path()); };

  SECTION("checksum") {
    saveSynthetic(dir.path(), "t", 2, 1);
    flipByte(opt1, fs::file_size(opt1) - 3);
    std::string e = errorOf(open);
    REQUIRE_THAT(e, Contains(opt1) && Contains("checksum mismatch"));
  }
  SECTION("truncated") {
    saveSynthetic(dir.path(), "t", 2, 1);
    fs::resize_file(opt1, fs::file_size(opt1) - 10);
    REQUIRE_THAT(errorOf(open), Contains(opt1) && Contains("truncated"));
  }
  SECTION("missing rank file") {
    saveSynthetic(dir.path(), "t", 2, 1);
    fs::remove(opt1);
    REQUIRE_THAT(errorOf(open), Contains(opt1) && Contains("is missing (rank 1 of 2)"));
  }
  SECTION("model file corrupted") {
    saveSynthetic(dir.path(), "t", 2, 1);
    flipByte(tagDir + "/model.safetensors", 20);
    REQUIRE_THAT(errorOf(open), Contains("model.safetensors checksum mismatch"));
  }
  SECTION("manifest missing: the save never finished") {
    saveSynthetic(dir.path(), "t", 2, 1);
    fs::remove(tagDir + "/manifest.json");
    REQUIRE_THAT(errorOf(open), Contains("manifest.json: manifest missing (incomplete checkpoint"));
  }
  SECTION("manifest corrupted") {
    saveSynthetic(dir.path(), "t", 2, 1);
    fs::resize_file(tagDir + "/manifest.json", 40);
    REQUIRE_THAT(errorOf(open), Contains("manifest.json: manifest is not valid JSON"));
  }
  SECTION("manifest of the wrong JSON types (found by checkpoint_manifest_fuzz)") {
    saveSynthetic(dir.path(), "t", 2, 1);
    const std::string mf = tagDir + "/manifest.json";
    const auto good = nlohmann::json::parse(ds::test::readFile(mf));
    auto edit = [&](const std::function<void(nlohmann::json&)>& f) {
      auto m = good;
      f(m);
      ds::test::writeFile(mf, m.dump());
      return errorOf(open);
    };
    // Before: a nlohmann exception escaped (format a number) or an undefined float-to-int cast.
    REQUIRE_THAT(edit([](auto& m) { m["format"] = 11; }),
                 Contains("not a dsrun checkpoint manifest"));
    REQUIRE_THAT(edit([](auto& m) { m["world_size"] = 1e300; }),
                 Contains("key 'world_size' has the wrong type (1e+300)"));
    REQUIRE_THAT(edit([](auto& m) { m["step"] = -1.5e22; }),
                 Contains("key 'step' has the wrong type"));
    REQUIRE_THAT(edit([](auto& m) { m["zero_stage"] = 4294967297ull; }),
                 Contains("key 'zero_stage' has the wrong type"));
    REQUIRE_THAT(edit([](auto& m) { m["files"][1]["rank"] = "x"; }),
                 Contains("file entry with rank -1"));
    // A numel that disagrees with its shape would have sized reads past the caller's buffer.
    REQUIRE_THAT(edit([](auto& m) { m["params"][0]["numel"] = 1000; }),
                 Contains("param 'a.w' has numel 1000 but shape [3,4]"));
    // A range whose end wraps around past the parameters.
    REQUIRE_THAT(edit([](auto& m) {
                   auto& r = m["files"][1]["ranges"][0];
                   r["offset"] = std::numeric_limits<uint64_t>::max() - 2;
                 }),
                 Contains("lacks tensor") || Contains("beyond the"));
  }
  SECTION("latest missing or empty") {
    REQUIRE_THAT(errorOf(open), Contains(dir.path() + "/latest: missing"));
    ds::test::writeFile(dir.path() + "/latest", "\n");
    REQUIRE_THAT(errorOf(open), Contains("latest: empty"));
    ds::test::writeFile(dir.path() + "/latest", "nope\n");
    REQUIRE_THAT(errorOf(open), Contains("no tag 'nope'"));
  }
  SECTION("bad tag") {
    REQUIRE_THAT(errorOf([&] { CheckpointReader::open(dir.path(), "../x"); }),
                 Contains("checkpoint tag '../x' invalid"));
  }
}

TEST_CASE("mismatched checkpoints are refused: names, shapes, counts, states, ranges",
          "[multirank]") {
  ds::test::TempDir dir;
  saveSynthetic(dir.path(), "t", 2, 2);
  auto r = CheckpointReader::open(dir.path());
  auto p = toyParams();
  p[2].shape = {7, 5};
  REQUIRE_THAT(errorOf([&] { r->checkParams(p); }),
               Contains("manifest.json") &&
                   Contains("parameter 'b.w' has shape [5,7], the model expects [7,5]"));
  p = toyParams();
  p[0].name = "a.weight";
  std::vector<float> flat(kToyNumel);
  REQUIRE_THAT(errorOf([&] { r->readModel(p, flat.data()); }),
               Contains("parameter 0 is 'a.w', the model expects 'a.weight'"));
  p = toyParams();
  p.push_back({"c.w", {2}, 2, {2}, true});
  REQUIRE_THAT(errorOf([&] { r->checkParams(p); }),
               Contains("has 4 parameters, the model has 5 (first missing: 'c.w')"));
  REQUIRE_THAT(errorOf([&] { r->readRange(0, 4, "momentum", flat.data()); }),
               Contains("no optimizer state 'momentum' (has: exp_avg, exp_avg_sq, fp32)"));
  REQUIRE_THAT(errorOf([&] { r->readRange(50, 10, "fp32", flat.data()); }),
               Contains("optimizer state 'fp32' has no data for flat elements [56, 60)"));
}

TEST_CASE("latest moves only when every rank's files are there", "[multirank]") {
  ds::test::TempDir dir;
  saveSynthetic(dir.path(), "good", 2, 1);
  // Rank 0 of a 2-rank save whose rank 1 never wrote: the manifest cannot be completed.
  auto params = toyParams();
  std::vector<float> full(kToyNumel, 1.0f);
  SaveRequest q;
  q.dir = dir.path();
  q.tag = "bad";
  q.worldSize = 2;
  q.params = &params;
  q.fullParams = full.data();
  q.optimizer.push_back({"fp32", 0, 28, full.data()});
  q.barrier = [] {};
  REQUIRE_THAT(errorOf([&] { ds::runtime::saveCheckpoint(q); }),
               Contains("optim_rank_00001.json: cannot open (file is missing)"));
  REQUIRE(ds::runtime::readLatestTag(dir.path()) == "good");
  REQUIRE_THAT(errorOf([&] { CheckpointReader::open(dir.path(), "bad"); }),
               Contains("manifest missing"));
  // Ranks that disagree on the step are refused at save time.
  std::barrier sync(2);
  std::string err;
  ds::test::runRanks(2, [&](int r) {
    SaveRequest s = q;
    s.tag = "split";
    s.rank = r;
    s.step = r == 0 ? 5 : 6;
    s.fullParams = r == 0 ? full.data() : nullptr;
    s.optimizer = {{"fp32", size_t(r) * 28, 28, full.data()}};
    s.barrier = [&] { sync.arrive_and_wait(); };
    if (r == 0) err = errorOf([&] { ds::runtime::saveCheckpoint(s); });
    else {
      try {
        ds::runtime::saveCheckpoint(s);
      } catch (...) {
      }
    }
    if (r == 0) sync.arrive_and_wait();  // rank 0 threw before its second barrier
  });
  REQUIRE_THAT(err, Contains("optim_rank_00001.json says world size 2 step 6, rank 0 has world "
                             "size 2 step 5"));
  REQUIRE(ds::runtime::readLatestTag(dir.path()) == "good");
}

TEST_CASE("safetensors reader refuses malformed files naming them", "[unit]") {
  ds::test::TempDir dir;
  auto expect = [&](const std::string& name, const std::string& bytes, const std::string& what) {
    ds::test::writeFile(dir.file(name), bytes);
    REQUIRE_THAT(errorOf([&] { ds::runtime::ckpt::SafetensorsReader r(dir.file(name)); }),
                 Contains(dir.file(name)) && Contains(what));
  };
  auto withHeader = [](const std::string& h, size_t dataBytes) {
    std::string s(8, '\0');
    uint64_t n = h.size();
    for (int i = 0; i < 8; ++i) s[i] = char((n >> (8 * i)) & 0xff);
    return s + h + std::string(dataBytes, '\0');
  };
  expect("short", "abc", "shorter than the 8-byte header length");
  expect("len",
         withHeader("{}", 0).replace(0, 8, std::string("\xff\xff\xff\x00\x00\x00\x00\x00", 8)),
         "header length 16777215 exceeds the file");
  expect("json", withHeader("{not json", 0), "header is not JSON");
  expect("dtype", withHeader(R"({"x":{"dtype":"Q8","shape":[1],"data_offsets":[0,1]}})", 1),
         "tensor 'x' has unknown dtype \"Q8\"");
  expect("past", withHeader(R"({"x":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8),
         "tensor 'x' data_offsets [0, 16] outside the 8 data bytes");
  expect("size", withHeader(R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8),
         "tensor 'x' has 8 bytes but shape x dtype needs 12");
}

TEST_CASE("random header damage and truncation only ever give ds::Error", "[unit]") {
  ds::test::TempDir dir;
  std::vector<float> a(6, 1.5f), b(4, -2.0f);
  const std::string good = dir.file("good.safetensors");
  ds::runtime::ckpt::writeSafetensors(
      good, {{"a", ds::DType::kF32, {2, 3}, a.data()}, {"b", ds::DType::kF32, {4}, b.data()}},
      {{"k", "v"}});
  const std::string bytes = ds::test::readFile(good);
  uint64_t s = 12345;
  auto next = [&] {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return s >> 33;
  };
  int refused = 0, parsed = 0;
  for (int i = 0; i < 600; ++i) {
    std::string m = bytes;
    if (i % 3 == 0) {
      m.resize(next() % m.size());  // truncation anywhere
    } else {
      const size_t headerEnd = 8 + (uint8_t(m[0]) | (uint8_t(m[1]) << 8));
      for (int k = 0; k < 1 + int(next() % 4); ++k) m[next() % headerEnd] = char(next());
    }
    const std::string path = dir.file("m.safetensors");
    ds::test::writeFile(path, m);
    try {
      ds::runtime::ckpt::SafetensorsReader r(path);
      std::vector<float> out(64);
      for (const auto& e : r.entries()) {
        if (e.numel <= out.size() && (e.dtype == ds::DType::kF32 || e.dtype == ds::DType::kBF16))
          r.readF32(e, 0, e.numel, out.data());
      }
      ++parsed;
    } catch (const ds::Error& e) {
      REQUIRE(std::string(e.what()).find(path) != std::string::npos);
      ++refused;
    }
  }
  INFO("parsed " << parsed << " refused " << refused);
  REQUIRE(refused > 300);
}
