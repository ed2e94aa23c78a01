// Pipeline stages (runtime/engine/pipeline_stage.h, pipeline_schedule.h): the stage split and
// 1F1B order, the refusals naming the numbers, and a pipelined step over real gloo groups giving
// the loss and gradients of the same micro-batches run through one whole model (tied wte: the
// first and last stage's gradient copies sum to the whole model's).
#include <catch2/catch.hpp>

#include <mutex>

#include <fmt/format.h>

#include "core/error.h"
#include "runtime/engine/pipeline_stage.h"
#include "runtime/engine/stage_params.h"
#include "tests/runtime/engine/engine_fixtures.h"
#include "tests/runtime/model/model_harness.h"
#include "tests/runtime/tensor/grad_check.h"
#include "zero/zero_engine.h"

using namespace ds;
using namespace ds::runtime;

namespace {

ModelConfig stageGpt(int layers, bool ckpt, DType dtype) {
  ModelConfig cfg;
  cfg.kind = "gpt2";
  cfg.nLayer = layers;
  cfg.nHead = 2;
  cfg.nEmbd = 8;
  cfg.seqLen = 6;
  cfg.vocabSize = 11;
  cfg.paddedVocab = 16;
  cfg.activationCheckpointing = ckpt;
  cfg.compute = dtype;
  return cfg;
}

std::vector<Batch> microBatches(int count) {
  std::vector<Batch> out(static_cast<size_t>(count));
  uint32_t state = 12345;
  auto next = [&state]() {
    state = state * 1664525u + 1013904223u;
    return static_cast<int32_t>((state >> 8) % 11u);
  };
  for (Batch& mb : out) {
    mb.B = 2;
    mb.T = 5;
    for (int i = 0; i < mb.B * mb.T; ++i) mb.inputs.push_back(next());
    for (int i = 0; i < mb.B * mb.T; ++i) mb.targets.push_back(i % 7 == 3 ? -1 : next());
  }
  return out;
}

void initOwner(const Model& model, test::ParamOwner& owner) {
  model.initParams(owner.flat.data(), 7);
  auto noise = test::uniformVec(owner.flat.size(), 0.3f, 99);
  for (size_t i = 0; i < owner.flat.size(); ++i) owner.flat[i] += noise[i];
  owner.sync();
}

struct StepOut {
  double lossSum = 0;
  std::vector<float> grad;  // whole-model layout; a stage's own parameters only (tied: summed)
};

// One whole model, micro-batches in order, loss scaled by 1/m as the trainer does.
StepOut reference(const ModelConfig& cfg, const std::vector<Batch>& mbs) {
  Gpt2Model model(cfg);
  test::ParamOwner owner(model, cfg.compute == DType::kBF16, /*gate=*/true);
  initOwner(model, owner);
  StepOut out;
  const float scale = 1.0f / static_cast<float>(mbs.size());
  for (const Batch& mb : mbs) {
    out.lossSum +=
        model.forward(mb.inputs.data(), mb.targets.data(), mb.B, mb.T, owner.table, owner);
    model.backward(scale, owner.table, owner);
  }
  out.grad = owner.grad;
  return out;
}

// Transports these thread ranks can run: gloo over TCP, and gloo wrapped in the shared-memory
// backend ("gloo+shm", comm/shm: its send/recv go to the wrapped gloo). MPI needs mpirun (its
// send/recv are MPI_Isend/Irecv posted at once, covered by tests/comm conformance under mpirun).
std::vector<std::string> threadBackends() { return {"gloo", "gloo+shm"}; }

// `chunks` > 1: the interleaved schedule, the layers split over stages x chunks virtual stages.
StepOut pipelined(const ModelConfig& cfg, const std::vector<Batch>& mbs, int stages,
                  const std::string& backend = "gloo", int chunks = 1) {
  StepOut out;
  Gpt2Model shape(cfg);
  out.grad.assign(shape.numParamsTotal(), 0.0f);
  std::mutex mutex;
  const auto split = splitBlocks(cfg.nLayer, stages * chunks);
  auto store = std::make_shared<comm::HashStore>();
  test::runRanks(stages, [&](int rank) {
    comm::GroupOptions gopts;
    gopts.backend = "gloo";
    gopts.sharedMemory = backend == "gloo+shm";
    gopts.hostAddr = "127.0.0.1";
    gopts.timeout = std::chrono::seconds(60);
    comm::ProcessGroup pipe(comm::createBackend("gloo", store, rank, stages, gopts));
    comm::ProcessGroup* group = &pipe;
    Gpt2Model full(cfg);
    test::ParamOwner owner(full, cfg.compute == DType::kBF16, /*gate=*/true);
    initOwner(full, owner);
    PipelineStageOptions opts;
    opts.stage = rank;
    opts.stages = stages;
    opts.microBatches = static_cast<int>(mbs.size());
    opts.chunks = stageChunks(split, rank, stages);
    PipelineStage stage(cfg, group, opts);
    const auto res = stage.step([&mbs](int micro) -> const Batch& { return mbs[micro]; },
                                1.0f / static_cast<float>(mbs.size()), owner.table, owner);
    std::lock_guard<std::mutex> lock(mutex);
    if (stage.last()) out.lossSum = res.lossSum;
    for (size_t param : stageParams(full.params(), opts.chunks)) {
      const size_t off = owner.offset(param);
      for (size_t i = 0; i < full.params()[param].numel; ++i)
        out.grad[off + i] += owner.grad[off + i];
    }
  });
  return out;
}

void checkSame(const StepOut& got, const StepOut& want, double rel, const std::string& what) {
  INFO(what);
  CHECK(test::relDiff(got.lossSum, want.lossSum) <= rel);
  REQUIRE(got.grad.size() == want.grad.size());
  double worst = 0;
  for (size_t i = 0; i < got.grad.size(); ++i)
    worst = std::max(worst, std::fabs(double(got.grad[i]) - double(want.grad[i])));
  INFO("worst absolute gradient difference " << worst);
  CHECK(worst <= rel);
}

}  // namespace

namespace {

std::vector<int> layersPerStage(const std::vector<StageBlocks>& split, int nLayer) {
  std::vector<int> out;
  for (const auto& stage : split)
    out.push_back(std::min(stage.last, nLayer + 1) - std::max(stage.first, 1));
  return out;
}

ParallelPlan stagesBy(int stages, PartitionMethod method, std::vector<int> layers = {}) {
  ParallelPlan plan;
  plan.pipeline = stages;
  plan.partition = method;
  plan.stageLayers = std::move(layers);
  return plan;
}

}  // namespace

TEST_CASE("pipeline: layers split by count, embeddings first and head last", "[unit]") {
  auto split = splitBlocks(4, 2);
  REQUIRE(split.size() == 2);
  CHECK(split[0].first == 0);
  CHECK(split[0].last == 3);  // embeddings + layers 1, 2
  CHECK(split[1].first == 3);
  CHECK(split[1].last == 6);  // layers 3, 4 + head
  auto uneven = splitBlocks(5, 3, /*requireDivisible=*/false);
  CHECK(uneven[0].last == 3);  // 0, 1, 2
  CHECK(uneven[1].first == 3);
  CHECK(uneven[1].last == 5);
  CHECK(uneven[2].last == 7);
  CHECK_THROWS_WITH(splitBlocks(5, 2), Catch::Contains("5 layers") && Catch::Contains("2"));
  CHECK_THROWS_AS(splitBlocks(2, 3), ConfigError);
  CHECK_THROWS_WITH(checkPipelinePlan("plan.yaml", 4, stagesBy(5, PartitionMethod::kParameters), 6),
                    Catch::Contains("plan.yaml") && Catch::Contains("4 layer(s)"));
}

// DeepSpeed's partition_method "parameters" balances the stages' parameter counts; the tied wte
// weighs on both ends, so at GPT-2 124M shapes the first and last stage hold one layer each and
// the middle stages the rest (uniform would give the first stage 60.7M parameters, 1.5x the
// others).
TEST_CASE("pipeline: stages balanced by parameter count, uniform or given", "[unit]") {
  ModelConfig gpt2 = stageGpt(12, false, DType::kF32);
  gpt2.nHead = 12;
  gpt2.nEmbd = 768;
  gpt2.seqLen = 1024;
  gpt2.vocabSize = 50257;
  gpt2.paddedVocab = 50304;
  const auto weights = blockParamCounts(Gpt2Model(gpt2).params(), 12);
  REQUIRE(weights.size() == 14);
  CHECK(weights[0] == 50304 * 768 + 1024 * 768);   // wte + wpe
  CHECK(weights[1] == 12 * 768 * 768 + 13 * 768);  // one layer
  CHECK(weights[13] == 50304 * 768 + 2 * 768);     // tied head + final LayerNorm
  const auto byParams = partitionBlocks(12, stagesBy(4, PartitionMethod::kParameters), weights);
  CHECK(layersPerStage(byParams, 12) == std::vector<int>{1, 5, 5, 1});
  CHECK(byParams.front().first == 0);
  CHECK(byParams.back().last == 14);
  CHECK(layersPerStage(partitionBlocks(12, stagesBy(2, PartitionMethod::kParameters), weights),
                       12) == std::vector<int>{6, 6});
  CHECK(layersPerStage(partitionBlocks(12, stagesBy(4, PartitionMethod::kUniform), weights), 12) ==
        std::vector<int>{3, 3, 3, 3});
  CHECK_THROWS_WITH(partitionBlocks(12, stagesBy(5, PartitionMethod::kUniform), weights),
                    Catch::Contains("12 layers") && Catch::Contains("5 stages") &&
                        Catch::Contains("partition_method: parameters"));
  CHECK(layersPerStage(partitionBlocks(12, stagesBy(5, PartitionMethod::kParameters), weights),
                       12) == std::vector<int>{1, 3, 3, 4, 1});
  const auto given =
      partitionBlocks(12, stagesBy(3, PartitionMethod::kExplicit, {2, 8, 2}), weights);
  CHECK(layersPerStage(given, 12) == std::vector<int>{2, 8, 2});
  CHECK(given[1].first == 3);
  CHECK(given[1].last == 11);
  // Equal layers (no embeddings weight): the balanced split is the uniform one, earliest cuts
  // first when it cannot be even.
  const std::vector<int64_t> flat(7, 0);
  std::vector<int64_t> layersOnly = flat;
  for (int block = 1; block <= 5; ++block) layersOnly[size_t(block)] = 10;
  CHECK(layersPerStage(partitionBlocks(5, stagesBy(2, PartitionMethod::kParameters), layersOnly),
                       5) == std::vector<int>{2, 3});
  // Refusals name the numbers.
  CHECK_THROWS_WITH(
      partitionBlocks(12, stagesBy(3, PartitionMethod::kExplicit, {2, 8}), weights),
      Catch::Contains("[2, 8]") && Catch::Contains("2 entries") && Catch::Contains("pipeline = 3"));
  CHECK_THROWS_WITH(partitionBlocks(12, stagesBy(2, PartitionMethod::kExplicit, {2, 8}), weights),
                    Catch::Contains("sums to 10") && Catch::Contains("has 12"));
  CHECK_THROWS_WITH(partitionBlocks(12, stagesBy(2, PartitionMethod::kExplicit, {0, 12}), weights),
                    Catch::Contains("at least one layer"));
  CHECK_THROWS_WITH(partitionBlocks(3, stagesBy(4, PartitionMethod::kParameters), weights),
                    Catch::Contains("4 stage(s)") && Catch::Contains("3 layer(s)"));
}

TEST_CASE("pipeline: 1F1B warm-up, steady state and cool-down", "[unit]") {
  auto text = [](const std::vector<PipeOp>& ops) {
    std::string out;
    for (const PipeOp& op : ops)
      out += fmt::format("{}{} ", op.kind == PipeOp::kForward ? 'F' : 'B', op.micro);
    return out;
  };
  CHECK(text(oneFOneB(0, 3, 4)) == "F0 F1 F2 B0 F3 B1 B2 B3 ");
  CHECK(text(oneFOneB(1, 3, 4)) == "F0 F1 B0 F2 B1 F3 B2 B3 ");
  CHECK(text(oneFOneB(2, 3, 4)) == "F0 B0 F1 B1 F2 B2 F3 B3 ");
  CHECK_THROWS_WITH(oneFOneB(0, 4, 3), Catch::Contains("gradient_accumulation_steps 3") &&
                                           Catch::Contains("4 stages"));
  CHECK(idealBubble(2, 4) == Approx(0.2));
}

// Megatron's interleaved order for P=2, v=2, m=4 (micro.chunk): stage 0 warms up with 4 forwards
// (its chunk 0 and 1 of micro-batches 0 and 1), stage 1 with 2.
TEST_CASE("pipeline: interleaved 1F1B order over virtual stages", "[unit]") {
  auto text = [](const std::vector<PipeOp>& ops) {
    std::string out;
    for (const PipeOp& op : ops)
      out += fmt::format("{}{}.{} ", op.kind == PipeOp::kForward ? 'F' : 'B', op.micro, op.chunk);
    return out;
  };
  CHECK(text(interleavedOneFOneB(0, 2, 2, 4)) ==
        "F0.0 F1.0 F0.1 F1.1 F2.0 B0.1 F3.0 B1.1 F2.1 B0.0 F3.1 B1.0 B2.1 B3.1 B2.0 B3.0 ");
  CHECK(text(interleavedOneFOneB(1, 2, 2, 4)) ==
        "F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 F2.0 B0.0 F3.0 B1.0 F2.1 B2.1 F3.1 B3.1 B2.0 B3.0 ");
  CHECK(text(interleavedOneFOneB(1, 3, 1, 4)) == text(oneFOneB(1, 3, 4)));
  CHECK_THROWS_WITH(interleavedOneFOneB(0, 2, 2, 3),
                    Catch::Contains("gradient_accumulation_steps 3") &&
                        Catch::Contains("multiple of parallel.pipeline = 2"));
  CHECK(idealBubble(2, 4, 2) == Approx(1.0 / 9.0));
  const std::vector<StageBlocks> virtualSplit = splitBlocks(8, 4);
  const auto chunks = stageChunks(virtualSplit, 1, 2);  // virtual stages 1 and 3
  REQUIRE(chunks.size() == 2);
  CHECK(chunks[0].first == 3);
  CHECK(chunks[0].last == 5);
  CHECK(chunks[1].first == 7);
  CHECK(chunks[1].last == 10);  // layers 6, 7 + head
}

// Every stage runs its schedule in order; a forward of (micro, virtual stage vs) needs vs-1's
// forward of that micro-batch, a backward vs+1's backward (sends never block, receives do).
// Running all stages until none can move finds a deadlock or a missing dependency.
TEST_CASE("pipeline: the interleaved schedules of all stages run to the end together", "[unit]") {
  for (int stages : {2, 3, 4})
    for (int chunks : {1, 2, 3})
      for (int groups : {1, 2, 3}) {
        const int micro = stages * groups;
        const int total = stages * chunks;
        INFO("P=" << stages << " v=" << chunks << " m=" << micro);
        std::vector<std::vector<PipeOp>> ops;
        for (int stage = 0; stage < stages; ++stage)
          ops.push_back(stageSchedule(stage, stages, chunks, micro));
        // done[kind][micro][virtual stage]
        std::vector<std::vector<std::vector<bool>>> done(
            2, std::vector<std::vector<bool>>(static_cast<size_t>(micro),
                                              std::vector<bool>(static_cast<size_t>(total))));
        std::vector<size_t> next(static_cast<size_t>(stages), 0);
        bool moved = true;
        while (moved) {
          moved = false;
          for (int stage = 0; stage < stages; ++stage) {
            auto& pos = next[static_cast<size_t>(stage)];
            if (pos == ops[static_cast<size_t>(stage)].size()) continue;
            const PipeOp& op = ops[static_cast<size_t>(stage)][pos];
            const int vs = op.chunk * stages + stage;
            const auto mb = static_cast<size_t>(op.micro);
            const bool ready =
                op.kind == PipeOp::kForward
                    ? (vs == 0 || done[0][mb][size_t(vs - 1)])
                    : (done[0][mb][size_t(vs)] && (vs == total - 1 || done[1][mb][size_t(vs + 1)]));
            if (!ready) continue;
            done[op.kind == PipeOp::kForward ? 0 : 1][mb][size_t(vs)] = true;
            ++pos;
            moved = true;
          }
        }
        for (int stage = 0; stage < stages; ++stage)
          CHECK(next[static_cast<size_t>(stage)] == ops[static_cast<size_t>(stage)].size());
        for (const auto& kind : done)
          for (const auto& row : kind)
            for (bool cell : row) CHECK(cell);
      }
}

// The same block code over the same micro-batches in the same order: the loss sum and every
// gradient agree to fp32 rounding of the activation hand-over (none in fp32: the residual
// stream is sent as it is held). Checkpointing recomputes within the stage.
TEST_CASE("pipeline: a 1F1B step over 2 and 4 stages gives one model's loss and gradients",
          "[multirank]") {
  const auto mbs = microBatches(4);
  CHECK(!threadBackends().empty());
  for (bool ckpt : {false, true}) {
    const ModelConfig cfg = stageGpt(4, ckpt, DType::kF32);
    const StepOut want = reference(cfg, mbs);
    for (const auto& backend : threadBackends())
      for (int stages : {2, 4})
        checkSame(pipelined(cfg, mbs, stages, backend), want, 1e-6,
                  fmt::format("{} stages over {}, checkpointing {}", stages, backend, ckpt));
  }
}

// Interleaved: 2 stages x 2 chunks of one layer each (the activations cross the pipeline group
// three times per micro-batch, stage 1 hands chunk 0's output back to stage 0's chunk 1).
TEST_CASE("pipeline: an interleaved step gives one model's loss and gradients", "[multirank]") {
  const auto mbs = microBatches(4);
  for (bool ckpt : {false, true}) {
    const ModelConfig cfg = stageGpt(4, ckpt, DType::kF32);
    checkSame(pipelined(cfg, mbs, 2, "gloo", 2), reference(cfg, mbs), 1e-6,
              fmt::format("2 stages x 2 chunks, checkpointing {}", ckpt));
  }
  const ModelConfig six = stageGpt(6, false, DType::kF32);
  checkSame(pipelined(six, microBatches(6), 3, "gloo", 2), reference(six, microBatches(6)), 1e-6,
            "3 stages x 2 chunks");
}

TEST_CASE("pipeline: bf16 stages match one bf16 model", "[multirank]") {
  const auto mbs = microBatches(3);
  const ModelConfig cfg = stageGpt(2, false, DType::kBF16);
  checkSame(pipelined(cfg, mbs, 2), reference(cfg, mbs), 1e-6, "bf16, 2 stages");
}

// Each stage's ZeRO engine holds only its stage's parameters (StageParams renumbers them and
// their blocks); the gradients it accumulates are the whole model's for those parameters.
TEST_CASE("pipeline: stage engines over their own parameters give one model's gradients",
          "[multirank]") {
  const auto mbs = microBatches(4);
  const ModelConfig cfg = stageGpt(4, false, DType::kF32);
  const StepOut want = reference(cfg, mbs);
  const int stages = 2;
  const int chunks = GENERATE(1, 2);  // 2: interleaved, virtual stages of one layer each
  INFO(chunks << " chunk(s) per stage");
  const auto split = splitBlocks(cfg.nLayer, stages * chunks);
  Gpt2Model shape(cfg);
  StepOut got;
  got.grad.assign(shape.numParamsTotal(), 0.0f);
  std::vector<size_t> held(stages, 0);
  std::mutex mutex;
  test::withRanks(stages, [&](int rank, comm::ProcessGroup* group) {
    Gpt2Model full(cfg);
    test::ParamOwner owner(full, false, /*gate=*/false);
    initOwner(full, owner);
    const auto stageBlocks = stageChunks(split, rank, stages);
    StageParams view(full.params(), stageBlocks);
    std::vector<float> localFlat;
    for (size_t i = 0; i < view.localParams().size(); ++i) {
      const size_t off = owner.offset(view.modelIndex(i));
      localFlat.insert(
          localFlat.end(), owner.flat.begin() + static_cast<std::ptrdiff_t>(off),
          owner.flat.begin() + static_cast<std::ptrdiff_t>(off + view.localParams()[i].numel));
    }
    zero::ZeroOptions zopts;
    zopts.stage = 0;
    zero::ZeroEngine engine(view.localParams(), view.numLocalBlocks(), nullptr, zopts,
                            zero::OptimizerOptions{});
    engine.setParamsFrom([&localFlat](size_t offset, size_t size, float* out) {
      std::copy_n(localFlat.begin() + static_cast<std::ptrdiff_t>(offset), size, out);
    });
    view.bind(&engine, &engine.table());
    PipelineStageOptions opts;
    opts.stage = rank;
    opts.stages = stages;
    opts.microBatches = static_cast<int>(mbs.size());
    opts.chunks = stageBlocks;
    PipelineStage stage(cfg, group, opts);
    engine.beginStep(true);
    const auto res = stage.step([&mbs](int micro) -> const Batch& { return mbs[micro]; },
                                1.0f / static_cast<float>(mbs.size()), view.table(), view);
    std::lock_guard<std::mutex> lock(mutex);
    held[static_cast<size_t>(rank)] = engine.numel();
    if (stage.last()) got.lossSum = res.lossSum;
    for (size_t i = 0; i < view.localParams().size(); ++i) {
      const size_t model = view.modelIndex(i);
      const float* grad = engine.table().grad[i];
      const size_t off = owner.offset(model);
      for (size_t j = 0; j < view.localParams()[i].numel; ++j) got.grad[off + j] += grad[j];
    }
  });
  checkSame(got, want, 1e-6, "2 stage engines");
  // wte is held twice (first and last stage), everything else once.
  CHECK(held[0] + held[1] == shape.numParamsTotal() + shape.params()[0].numel);
  CHECK(held[0] < shape.numParamsTotal());
}
