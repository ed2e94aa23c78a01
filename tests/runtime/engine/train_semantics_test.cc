// Training semantics a GPT user expects: weight decay on matrices only unless
// train.weight_decay_on = all (checked on the parameters one SGD step moves, and in the startup
// line), and evaluation reading each validation batch once (eval_steps or eval_tokens capped by
// the set with a warning naming both sizes, never wrapping to the start), and the startup line of
// a compressed optimizer (when it compresses; a warning where the run never will).
#include <catch2/catch.hpp>

#include <cstdio>
#include <string>

#include "runtime/engine/train_semantics.h"
#include "runtime/engine/trainer.h"
#include "tests/runtime/engine/engine_fixtures.h"

using namespace ds;
using namespace ds::runtime;

namespace {

struct Captured {
  std::FILE* file = std::tmpfile();
  ~Captured() { std::fclose(file); }
  std::string text() const {
    std::fflush(file);
    std::rewind(file);
    std::string out;
    char buf[4096];
    size_t got;
    while ((got = std::fread(buf, 1, sizeof buf, file)) > 0) out.append(buf, got);
    return out;
  }
};

struct OneStep {
  std::vector<float> init, params;
  std::vector<zero::ParamInfo> infos;
  std::string log;
};

OneStep sgdStep(float weightDecay, const std::string& on) {
  Plan p = test::gptPlan(1, 2, 1, 1);
  p.deepspeed.optimizer.type = "SGD";
  p.deepspeed.optimizer.lr = 0.1f;
  p.deepspeed.optimizer.momentum = 0;
  p.deepspeed.optimizer.weightDecay = weightDecay;
  p.deepspeed.gradientClipping = 0;
  p.train.weightDecayOn = on;
  Captured out;
  TrainerOptions o;
  o.out = out.file;
  Trainer t(p, nullptr, o);
  auto init = t.fullParams();
  t.trainStep();
  return {std::move(init), t.fullParams(), t.model().params(), out.text()};
}

// For each parameter: whether its values equal in a and b, bitwise.
std::vector<bool> sameParams(const OneStep& a, const OneStep& b) {
  std::vector<bool> same;
  size_t off = 0;
  for (const auto& info : a.infos) {
    bool eq = true;
    for (size_t i = off; i < off + info.numel; ++i) eq = eq && a.params[i] == b.params[i];
    same.push_back(eq);
    off += info.numel;
  }
  return same;
}

double evalLoss(Plan p, std::string* log = nullptr) {
  Captured out;
  TrainerOptions o;
  o.out = out.file;
  Trainer t(p, nullptr, o);
  const double loss = t.evaluate();
  if (log) *log = out.text();
  return loss;
}

}  // namespace

TEST_CASE("trainer: weight decay applies to matrices only by default, to all when asked",
          "[unit]") {
  const OneStep none = sgdStep(0.f, "matrices");
  const OneStep matrices = sgdStep(0.5f, "matrices");
  const OneStep all = sgdStep(0.5f, "all");
  const auto noneVsMatrices = sameParams(none, matrices);
  const auto matricesVsAll = sameParams(matrices, all);
  size_t off = 0, movedByAll = 0;
  for (size_t i = 0; i < none.infos.size(); ++i) {
    const bool matrix = none.infos[i].shape.size() >= 2;
    bool zeroInit = true;  // decay of 0 is 0: the biases start at 0
    for (size_t k = off; k < off + none.infos[i].numel; ++k)
      zeroInit = zeroInit && none.init[k] == 0;
    off += none.infos[i].numel;
    INFO(none.infos[i].name);
    CHECK(noneVsMatrices[i] == !matrix);              // decay moved exactly the matrices
    CHECK(matricesVsAll[i] == (matrix || zeroInit));  // "all" moves the 1-D parameters too
    movedByAll += matricesVsAll[i] ? 0 : 1;
  }
  CHECK(movedByAll == 5);  // the LayerNorm gains (start at 1): ln1w, ln2w per layer, lnfw
  // 2 layers: wte, wpe and 4 matrices per layer; 8 vectors per layer and the final LayerNorm.
  CHECK_THAT(matrices.log, Catch::Contains("weight decay 0.5 on matrices (train.weight_decay_on): "
                                           "10 tensors / 26112 elements decayed; 18 tensors / 896 "
                                           "elements (biases, LayerNorm) not"));
  CHECK_THAT(all.log,
             Catch::Contains("weight decay 0.5 on all (train.weight_decay_on): 28 tensors"));
  CHECK_THAT(none.log, Catch::Contains("(weight_decay is 0: no decay at all)"));
}

TEST_CASE("trainer: an eval reads each validation batch once, capped by the set", "[unit]") {
  Plan p = test::gptPlan(1, 0, 1, 1);          // 8 sequences x 16 tokens per global batch
  p.data.syntheticValTokens = 3 * 8 * 16 + 1;  // exactly 3 batches
  p.train.evalSteps = 3;
  std::string log;
  const double three = evalLoss(p, &log);
  CHECK(log.find("warning") == std::string::npos);

  // Asking for more batches than the set holds reads the 3 once (a wrap would add batch 0 again).
  p.train.evalSteps = 4;
  CHECK(evalLoss(p, &log) == three);
  CHECK_THAT(log, Catch::Contains("warning: train.eval_steps = 4 asks for 512 tokens (8 x 1 "
                                  "rank(s) x 16 tokens per batch) but the validation set "));
  CHECK_THAT(log, Catch::Contains(" holds 385 tokens, 3 whole batch(es) (384 tokens); each eval "
                                  "reads those 3 batch(es) once"));

  // eval_tokens: whole batches covering the tokens asked for.
  p.train.evalSteps = 8;
  p.train.evalTokens = 3 * 128 - 5;
  CHECK(evalLoss(p, &log) == three);
  CHECK(log.find("warning") == std::string::npos);
  p.train.evalTokens = 10000;
  CHECK(evalLoss(p, &log) == three);
  CHECK_THAT(log, Catch::Contains("warning: train.eval_tokens = 10000 asks for 79 batch(es)"));
  p.train.evalTokens = 100;
  const double one = evalLoss(p);
  p.train.evalTokens = 0;
  p.train.evalSteps = 1;
  CHECK(evalLoss(p) == one);
  CHECK(one != three);
}

TEST_CASE("trainer: a compressed optimizer says when it compresses, and warns when it never will",
          "[unit]") {
  Plan p = test::gptPlan(1, 0, 1, 1);
  p.train.steps = 50;
  CHECK(compressionLine(p).empty());  // AdamW: nothing to say
  p.deepspeed.optimizer.type = "OneBitAdam";
  p.deepspeed.optimizer.freezeStep = 20;
  CHECK(compressionLine(p) ==
        "optimizer OneBitAdam: exact Adam steps 1..20 (freeze_step; gradients allreduced in "
        "full), 1-bit compressed from step 21");
  p.deepspeed.optimizer.freezeStep = 100000;  // DeepSpeed's default, far past a short run
  CHECK_THAT(compressionLine(p),
             Catch::EndsWith("; warning: train.steps 50 ends at or before freeze_step 100000: "
                             "this run never compresses (plain Adam throughout; DeepSpeed's "
                             "default freeze_step is 100000: set it below train.steps)"));
  p.deepspeed.optimizer.type = "OneBitLamb";
  p.deepspeed.optimizer.freezeStep = 50;  // the last step is still exact
  CHECK_THAT(compressionLine(p), Catch::StartsWith("optimizer OneBitLamb: exact LAMB steps 1..50"));
  CHECK_THAT(compressionLine(p), Catch::Contains("this run never compresses (plain LAMB"));
  p.deepspeed.optimizer.type = "ZeroOneAdam";
  p.deepspeed.optimizer.varFreezeStep = 10;
  CHECK_THAT(compressionLine(p), Catch::StartsWith("optimizer ZeroOneAdam: 1-bit averaged "
                                                   "momentum from step 1"));
  CHECK_THAT(compressionLine(p), Catch::Contains("until step 10 (var_freeze_step), then local "
                                                 "steps synchronised every 1..16 steps"));
  CHECK(compressionLine(p).find("no local steps") == std::string::npos);
  p.deepspeed.optimizer.varFreezeStep = 100000;
  CHECK_THAT(compressionLine(p),
             Catch::EndsWith("; train.steps 50 ends before var_freeze_step: no local steps"));

  // The trainer prints it at startup.
  p.deepspeed.optimizer.type = "OneBitAdam";
  std::string log;
  evalLoss(p, &log);
  CHECK_THAT(log, Catch::Contains("optimizer OneBitAdam: exact Adam steps 1..50 "));
  CHECK_THAT(log, Catch::Contains("this run never compresses"));
}
