// Gpt2Model with wte split by vocabulary rows over a data-parallel group of 2 and 3 ranks
// (threads over real gloo groups; issue 15 item 3): every rank trains on its own tokens (the last
// rank on fewer positions), and each rank's loss and non-wte gradients equal the single-rank
// model's on that rank's batch, while its wte rows' gradient equals the SUM over ranks of the
// single-rank gradients of those rows (the data-parallel sum, with no reduction after). wte
// never appears whole: the table points at the rank's rows only.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "comm/process_group.h"
#include "comm/registry.h"
#include "comm/store/hash_store.h"
#include "core/error.h"
#include "runtime/model/gpt2.h"
#include "tests/runtime/model/model_harness.h"
#include "tests/support/spawn_ranks.h"

using namespace ds;
using namespace ds::runtime;

namespace {

ModelConfig smallGpt(int vocab, int padded, bool checkpointing) {
  ModelConfig cfg;
  cfg.nLayer = 2;
  cfg.nHead = 4;
  cfg.nEmbd = 32;
  cfg.seqLen = 8;
  cfg.vocabSize = vocab;
  cfg.paddedVocab = padded;
  cfg.activationCheckpointing = checkpointing;
  return cfg;
}

struct Batch {
  int B = 2, T = 8;
  std::vector<int32_t> inputs, targets;
};

// Rank `rank`'s batch: its own tokens; the last of `ranks` holds one sequence, the others two.
Batch makeBatch(int vocab, int rank, int ranks) {
  Batch batch;
  if (rank == ranks - 1) batch.B = 1;
  const int count = batch.B * batch.T;
  for (int i = 0; i < count; ++i) {
    batch.inputs.push_back((i * 7 + 3 + 5 * rank) % vocab);
    batch.targets.push_back(i == 5 ? -1 : (i * 11 + 1 + 3 * rank) % vocab);  // one ignored
  }
  return batch;
}

struct Result {
  float loss = 0;
  std::vector<float> grad;  // single: the whole flat gradient; split: the rank's (wte: own rows)
};

Result single(const ModelConfig& cfg, const Batch& batch) {
  Gpt2Model model(cfg);
  test::ParamOwner owner(model, false, false);
  model.initParams(owner.flat.data(), 7);
  owner.sync();
  Result out;
  out.loss = model.forward(batch.inputs.data(), batch.targets.data(), batch.B, batch.T, owner.table,
                           owner);
  model.backward(1.0f, owner.table, owner);
  out.grad = owner.grad;
  return out;
}

std::vector<Result> split(const ModelConfig& cfg, int ranks) {
  std::vector<Result> out(static_cast<size_t>(ranks));
  auto store = std::make_shared<comm::HashStore>();
  test::runRanks(
      ranks,
      [&](int rank) {
        comm::GroupOptions opts;
        opts.backend = "gloo";
        opts.hostAddr = "127.0.0.1";
        opts.timeout = std::chrono::seconds(60);
        comm::ProcessGroup group(comm::createBackend("gloo", store, rank, ranks, opts));
        Gpt2Model model(cfg, DataVocab{&group, rank, ranks});
        if (!model.params()[0].rowSharded) throw InternalError("wte is not marked rowSharded");
        test::ParamOwner owner(model, false, false);
        model.initParams(owner.flat.data(), 7);
        owner.sync();
        // The stage-3 contract: wte's value and grad are this rank's rows only.
        const size_t begin = size_t(DataVocab{&group, rank, ranks}.rowsPerRank(
                                 cfg.paddedVocab > 0 ? cfg.paddedVocab : cfg.vocabSize)) *
                             size_t(rank) * size_t(cfg.nEmbd);
        owner.table.value[0] = owner.flat.data() + begin;
        owner.table.grad[0] = owner.grad.data() + begin;
        const Batch batch = makeBatch(cfg.vocabSize, rank, ranks);
        // Two passes: a second forward/backward over the same ParamTable accumulates the same
        // gradients again (micro-steps), and the loss repeats.
        Result& res = out[static_cast<size_t>(rank)];
        for (int pass = 0; pass < 2; ++pass) {
          res.loss = model.forward(batch.inputs.data(), batch.targets.data(), batch.B, batch.T,
                                   owner.table, owner);
          model.backward(0.5f, owner.table, owner);
        }
        res.grad = owner.grad;
      },
      std::chrono::seconds(120));
  return out;
}

// |got - want| over [from, to) relative to the largest |want| there.
double worstRel(const std::vector<float>& got, const std::vector<float>& want, size_t from,
                size_t to) {
  double scale = 0, worst = 0;
  for (size_t i = from; i < to; ++i) scale = std::max(scale, double(std::fabs(want[i])));
  for (size_t i = from; i < to; ++i)
    worst = std::max(worst, std::fabs(double(got[i]) - double(want[i])));
  return scale > 0 ? worst / scale : worst;
}

}  // namespace

TEST_CASE("gpt2 data-parallel vocabulary: losses and gradients equal the single rank's",
          "[multirank]") {
  const int ranks = GENERATE(2, 3);
  const bool checkpointing = GENERATE(false, true);
  // vocab 30 in 32 padded rows: at 3 ranks, 11 rows each, the last rank 10 (8 real).
  const ModelConfig cfg = smallGpt(30, 32, checkpointing);
  INFO("data ranks " << ranks << (checkpointing ? ", activation checkpointing" : ""));
  std::vector<Result> want;
  for (int rank = 0; rank < ranks; ++rank)
    want.push_back(single(cfg, makeBatch(cfg.vocabSize, rank, ranks)));
  const auto got = split(cfg, ranks);
  const size_t wteSize = size_t(cfg.paddedVocab) * size_t(cfg.nEmbd);
  const size_t perRank = size_t((cfg.paddedVocab + ranks - 1) / ranks) * size_t(cfg.nEmbd);
  std::vector<float> wteSum(wteSize, 0.0f);
  for (const auto& res : want)
    for (size_t i = 0; i < wteSize; ++i) wteSum[i] += res.grad[i];
  for (int rank = 0; rank < ranks; ++rank) {
    INFO("rank " << rank);
    const Result& res = got[size_t(rank)];
    const Result& ref = want[size_t(rank)];
    CHECK(std::fabs(res.loss - ref.loss) <= 1e-6 * ref.loss);
    // Two passes at loss scale 0.5 accumulate the gradient of one pass at scale 1.
    CHECK(worstRel(res.grad, ref.grad, wteSize, ref.grad.size()) < 1e-5);
    const size_t begin = perRank * size_t(rank), end = std::min(wteSize, begin + perRank);
    CHECK(worstRel(res.grad, wteSum, begin, end) < 1e-5);
    // Rows outside this rank's are never written.
    CHECK(std::all_of(res.grad.begin(), res.grad.begin() + long(begin),
                      [](float value) { return value == 0.0f; }));
    CHECK(std::all_of(res.grad.begin() + long(end), res.grad.begin() + long(wteSize),
                      [](float value) { return value == 0.0f; }));
  }
}

TEST_CASE("gpt2 data-parallel vocabulary: bf16 and tensor parallelism are refused", "[unit]") {
  ModelConfig cfg = smallGpt(32, 32, false);
  cfg.compute = DType::kBF16;
  comm::ProcessGroup* fakeGroup = reinterpret_cast<comm::ProcessGroup*>(&cfg);  // never used
  CHECK_THROWS_WITH(Gpt2Model(cfg, DataVocab{fakeGroup, 0, 2}), Catch::Contains("fp32"));
  cfg.compute = DType::kF32;
  CHECK_FALSE(Gpt2Model(cfg, DataVocab{nullptr, 0, 1}).params()[0].rowSharded);
}
