// bench_pipeline_bubble: the measured bubble of a 1F1B pipeline step (runtime/engine/
// pipeline_stage.h) against the ideal (P-1)/(m+P-1), or with --chunks v > 1 of the interleaved
// schedule against (P-1)/(v*m+P-1). P stages run as threads over gloo on this
// host, each stage a slice of a small GPT-2 with equal layers per stage; a stage's bubble is the
// time it waits in receives over its step time. Reported: the mean over stages and the largest,
// per (P, m), after one warm-up step. Stages share this machine's cores, so with fewer cores than
// stages the figure includes waiting for a core (say the load average next to it).
// Usage: bench_pipeline_bubble [--stages P] [--chunks v] [--steps N] [--layers L] [--width C]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <omp.h>

#include "comm/process_group.h"
#include "comm/registry.h"
#include "comm/store/hash_store.h"
#include "runtime/engine/pipeline_stage.h"

using namespace ds;
using namespace ds::runtime;

namespace {

struct Args {
  int stages = 2, chunks = 1, steps = 4, layers = 4, width = 128;
};

Args parse(int argc, char** argv) {
  Args args;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    const int value = std::atoi(argv[i + 1]);
    if (key == "--stages") args.stages = value;
    else if (key == "--chunks") args.chunks = value;
    else if (key == "--steps") args.steps = value;
    else if (key == "--layers") args.layers = value;
    else if (key == "--width") args.width = value;
    else {
      std::fprintf(stderr, "bench_pipeline_bubble: unknown option %s\n", key.c_str());
      std::exit(2);
    }
  }
  return args;
}

struct Measured {
  double meanBubble = 0, maxBubble = 0, stepMs = 0;
};

Measured runOnce(const Args& args, int micro) {
  ModelConfig cfg;
  cfg.kind = "gpt2";
  cfg.nLayer = args.layers;
  cfg.nHead = 4;
  cfg.nEmbd = args.width;
  cfg.seqLen = 64;
  cfg.vocabSize = 512;
  cfg.paddedVocab = 512;
  std::vector<Batch> batches(static_cast<size_t>(micro));
  for (size_t k = 0; k < batches.size(); ++k) {
    Batch& mb = batches[k];
    mb.B = 4;
    mb.T = cfg.seqLen;
    for (int i = 0; i < mb.B * mb.T; ++i) {
      mb.inputs.push_back(static_cast<int32_t>((i * 7 + k * 13) % cfg.vocabSize));
      mb.targets.push_back(static_cast<int32_t>((i * 11 + k * 5 + 1) % cfg.vocabSize));
    }
  }
  const auto split = splitBlocks(cfg.nLayer, args.stages * args.chunks);
  auto store = std::make_shared<comm::HashStore>();
  std::vector<double> bubble(static_cast<size_t>(args.stages), 0), stepMs(bubble);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < args.stages; ++rank) {
    threads.emplace_back([&, rank] {
      omp_set_num_threads(1);
      comm::GroupOptions gopts;
      gopts.backend = "gloo";
      gopts.hostAddr = "127.0.0.1";
      gopts.timeout = std::chrono::seconds(120);
      comm::ProcessGroup pipe(comm::createBackend("gloo", store, rank, args.stages, gopts));
      Gpt2Model full(cfg);
      std::vector<float> flat(full.numParamsTotal()), grad(flat.size(), 0.0f);
      full.initParams(flat.data(), 1);
      zero::ParamTable table;
      size_t off = 0;
      for (const auto& info : full.params()) {
        table.value.push_back(flat.data() + off);
        table.value16.push_back(nullptr);
        table.grad.push_back(grad.data() + off);
        off += info.numel;
      }
      struct NoHooks : zero::BlockHooks {
        void beforeForward(int) override {}
        void afterForward(int) override {}
        void beforeBackward(int) override {}
        void afterBackward(int) override {}
      } hooks;
      PipelineStageOptions opts;
      opts.stage = rank;
      opts.stages = args.stages;
      opts.microBatches = micro;
      opts.chunks = stageChunks(split, rank, args.stages);
      PipelineStage stage(cfg, &pipe, opts);
      double idle = 0, total = 0;
      for (int step = 0; step <= args.steps; ++step) {
        pipe.barrier()->wait();
        const auto res = stage.step([&](int mbi) -> const Batch& { return batches[mbi]; },
                                    1.0f / float(micro), table, hooks);
        if (step == 0) continue;  // warm-up
        idle += res.idleMs;
        total += res.stepMs;
      }
      bubble[static_cast<size_t>(rank)] = idle / total;
      stepMs[static_cast<size_t>(rank)] = total / args.steps;
    });
  }
  for (auto& thr : threads) thr.join();
  Measured out;
  for (int rank = 0; rank < args.stages; ++rank) {
    out.meanBubble += bubble[static_cast<size_t>(rank)] / args.stages;
    out.maxBubble = std::max(out.maxBubble, bubble[static_cast<size_t>(rank)]);
    out.stepMs = std::max(out.stepMs, stepMs[static_cast<size_t>(rank)]);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  std::printf(
      "pipeline bubble: P=%d stages x %d chunk(s) (threads over gloo), GPT-2 L=%d C=%d T=64 "
      "B=4 per micro-batch, %d steps after 1 warm-up\n",
      args.stages, args.chunks, args.layers, args.width, args.steps);
  std::printf("%4s %10s %12s %12s %10s %10s\n", "m", "ideal", "mean stage", "worst stage",
              "mean/ideal", "step ms");
  for (int micro : {args.stages, 2 * args.stages, 4 * args.stages, 8 * args.stages}) {
    const Measured got = runOnce(args, micro);
    const double ideal = idealBubble(args.stages, micro, args.chunks);
    std::printf("%4d %10.3f %12.3f %12.3f %10.2f %10.1f\n", micro, ideal, got.meanBubble,
                got.maxBubble, got.meanBubble / ideal, got.stepMs);
  }
  return 0;
}
