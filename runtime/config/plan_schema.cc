// model / data / train blocks of the plan (DESIGN §4.7); keys and defaults in docs/plan.md.
#include "runtime/config/plan_schema.h"

#include <fmt/format.h>

#include <optional>

#include "core/error.h"

namespace ds::runtime {

ModelConfig readModel(NodeReader& r, std::string* initFrom) {
  ModelConfig m;
  bool gpt = r.has("gpt"), mlp = r.has("mlp");
  if (gpt == mlp) r.fail("", "give exactly one of model.gpt or model.mlp");
  if (gpt) {
    auto g = r.child("gpt");
    m.kind = "gpt2";
    m.nLayer = int(g->getInt("n_layer", 0, 1, 1024));
    m.nHead = int(g->getInt("n_head", 0, 1, 1024));
    m.nEmbd = int(g->getInt("n_embd", 0, 1, 65536));
    m.seqLen = int(g->getInt("seq_len", 0, 1, 1 << 20));
    m.vocabSize = int(g->getInt("vocab_size", 0, 2, 65536));
    m.paddedVocab = int(g->getInt("padded_vocab_size", 0, 0, 1 << 20));
    std::string from = g->getString("init_from", "");
    if (g->has("init_from") && from.empty()) g->fail("init_from", "expected a file path, got ''");
    if (initFrom) *initFrom = from;
    for (const char* k : {"n_layer", "n_head", "n_embd", "seq_len", "vocab_size"})
      if (!g->has(k)) g->fail(k, "required");
    if (m.nEmbd % m.nHead != 0)
      g->fail("n_embd", fmt::format("must be divisible by n_head ({}), got {}", m.nHead, m.nEmbd));
    if (m.paddedVocab && m.paddedVocab < m.vocabSize)
      g->fail("padded_vocab_size", fmt::format("must be >= vocab_size ({})", m.vocabSize));
    g->finish();
  } else {
    auto l = r.child("mlp");
    m.kind = "mlp";
    auto sizes = l->getIntList("sizes", 1, 1 << 24);
    if (sizes.size() < 2) l->fail("sizes", "expected at least 2 sizes (input ... output)");
    for (auto s : sizes) m.sizes.push_back(int(s));
    if (m.sizes.front() != m.sizes.back() || m.sizes.front() > 65536)
      l->fail("sizes",
              "first and last size are the vocabulary (equal, <= 65536) for next-token "
              "training");
    m.vocabSize = m.sizes.front();
    m.seqLen = int(l->getInt("seq_len", 64, 1, 1 << 20));
    l->finish();
  }
  r.finish();
  return m;
}

DataPlan readData(NodeReader& r, const ModelConfig& model) {
  DataPlan d;
  bool syn = r.has("synthetic"), shards = r.has("shards");
  if (syn && shards) r.fail("shards", "give either data.synthetic or data.shards, not both");
  if (shards) {
    d.kind = "shards";
    d.shards = r.getString("shards", "");
    d.val = r.getString("val", "");
    r.accept("synthetic");
  } else {
    d.kind = "synthetic";
    if (r.has("val")) r.fail("val", "only with data.shards (the synthetic corpus has its own)");
    r.accept("val");
    r.accept("synthetic");
    if (auto s = r.child("synthetic")) {
      d.syntheticSeed = uint64_t(s->getInt("seed", 1234, 0));
      d.syntheticTokens = s->getInt("tokens", 1 << 20, 2);
      d.syntheticValTokens = s->getInt("val_tokens", 1 << 16, 0);
      d.syntheticBranching = int(s->getInt("branching", 4, 1, 65536));
      s->finish();
    }
    if (d.syntheticBranching > model.vocabSize)
      r.fail("synthetic.branching", fmt::format("must be <= the vocabulary ({}), got {}",
                                                model.vocabSize, d.syntheticBranching));
  }
  r.finish();
  return d;
}

TrainPlan readTrain(NodeReader& r) {
  TrainPlan t;
  t.steps = r.getInt("steps", t.steps, 0);
  t.evalEvery = r.getInt("eval_every", 0, 0);
  t.evalSteps = r.getInt("eval_steps", 8, 1);
  t.evalTokens = r.getInt("eval_tokens", 0, 0);
  if (r.has("eval_steps") && r.has("eval_tokens"))
    r.fail("eval_tokens", "give either train.eval_tokens or train.eval_steps, not both");
  t.weightDecayOn = r.getString("weight_decay_on", t.weightDecayOn);
  if (t.weightDecayOn != "matrices" && t.weightDecayOn != "all")
    r.fail("weight_decay_on",
           fmt::format("expected 'matrices' (parameters of 2 or more dimensions: no decay for "
                       "biases and LayerNorm) or 'all', got '{}'",
                       t.weightDecayOn));
  t.seed = uint64_t(r.getInt("seed", 1234, 0));
  t.logEvery = r.getInt("log_every", 0, 0);
  t.device = r.getEnum("device", t.device, {"auto", "cpu", "cuda"});
  t.deviceSharing = r.getBool("device_sharing", t.deviceSharing);
  t.tf32 = r.getBool("tf32", t.tf32);
  t.memoryLimitMb = r.getInt("memory_limit_mb", 0, 0);
  t.threads = static_cast<int>(r.getInt("threads", 0, 0, 4096));
  if (auto c = r.child("checkpoint")) {
    t.checkpointDir = c->getString("dir", "");
    t.checkpointEvery = c->getInt("every", 0, 0);
    if (t.checkpointDir.empty() && t.checkpointEvery > 0)
      c->fail("dir", "required when train.checkpoint.every is set");
    c->finish();
  }
  r.finish();
  return t;
}

ParallelPlan readParallel(NodeReader& r, const ModelConfig& model, int worldSize) {
  ParallelPlan p;
  p.pipeline = int(r.getInt("pipeline", 1, 1, 4096));
  p.tensor = int(r.getInt("tensor", 1, 1, 4096));
  p.virtualStages = int(r.getInt("virtual_stages", 1, 1, 1024));
  const bool explicitLayers = r.has("stage_layers");
  if (explicitLayers) {
    if (r.has("partition_method"))
      r.fail("stage_layers",
             "give either parallel.stage_layers (layers per stage) or parallel.partition_method, "
             "not both");
    for (int64_t count : r.getIntList("stage_layers", 1, 1 << 20))
      p.stageLayers.push_back(int(count));
    p.partition = PartitionMethod::kExplicit;
    if (int(p.stageLayers.size()) != p.pipeline)
      r.fail("stage_layers", fmt::format("{} entries for parallel.pipeline = {}; give one layer "
                                         "count per pipeline stage",
                                         p.stageLayers.size(), p.pipeline));
  } else {
    const std::string given = r.getString("partition_method", "uniform");
    if (given.rfind("type:", 0) == 0)
      r.fail("partition_method",
             fmt::format("'{}': DeepSpeed's type:<regex> counts layers of a class; every layer of "
                         "a GPT is one transformer block, so give uniform (the same split)",
                         given));
    const std::string method =
        r.getEnum("partition_method", "uniform", {"parameters", "uniform"}, true);
    p.partition = method == "uniform" ? PartitionMethod::kUniform : PartitionMethod::kParameters;
  }
  r.finish();
  std::optional<ParallelGrid> grid;
  try {
    grid.emplace(worldSize, p);  // names world, pipeline and tensor
  } catch (const ConfigError& e) {
    r.fail("", e.what());
  }
  ModelShape shape;
  if (model.kind == "gpt2")
    shape = {model.nLayer, model.nHead, model.nEmbd,
             model.paddedVocab ? model.paddedVocab : model.vocabSize};
  else if (p.pipeline * p.tensor > 1)
    r.fail("",
           "tensor and pipeline parallelism split a GPT (model.gpt); an MLP model runs "
           "data parallelism only");
  try {
    grid->checkModel(shape);
  } catch (const ConfigError& e) {
    r.fail("", e.what());
  }
  if (p.virtualStages > 1) {
    if (p.pipeline == 1)
      r.fail("virtual_stages", fmt::format("{} chunks per stage interleave a pipeline; it needs "
                                           "parallel.pipeline > 1",
                                           p.virtualStages));
    if (p.partition != PartitionMethod::kUniform)
      r.fail("virtual_stages",
             fmt::format("{} chunks per stage split the layers uniformly over pipeline x "
                         "virtual_stages chunks; partition_method parameters and stage_layers "
                         "are for virtual_stages 1",
                         p.virtualStages));
    if (model.kind == "gpt2" && model.nLayer % (p.pipeline * p.virtualStages) != 0)
      r.fail("virtual_stages",
             fmt::format("{} layers (model.gpt.n_layer) do not divide over pipeline {} x "
                         "virtual_stages {} = {} chunks; every chunk holds the same whole number "
                         "of layers",
                         model.nLayer, p.pipeline, p.virtualStages, p.pipeline * p.virtualStages));
  }
  if (explicitLayers && model.kind == "gpt2") {
    int sum = 0;
    for (int count : p.stageLayers) sum += count;
    if (sum != model.nLayer)
      r.fail("stage_layers", fmt::format("[{}] sums to {} layers; the model has {} "
                                         "(model.gpt.n_layer)",
                                         fmt::join(p.stageLayers, ", "), sum, model.nLayer));
  }
  return p;
}

}  // namespace ds::runtime
