// bench_offload_hooks: the host-side cost of ZeRO-Offload's per-block hooks (the DeviceMirror over
// the host ZeroEngine) at GPT-2 124M shapes, with no model compute: per step, forward's hooks
// (parameter uploads after a step), backward's hooks (gradient downloads, the host adds, the
// engine's bucket work) and the engine's step (CPU Adam, refresh), the mirror's own time split
// from the engine's. On the CPU ops the copies are memcpy; with --device cuda the same hooks run
// against a GPU (pinned staging, the copy stream), so the figure is what the hooks cost when the
// device has nothing else to do: the floor of the offload step time, whatever overlaps. With
// the optimizer overlap (DS_OFFLOAD_OVERLAP, default on; resident mirror only) the parameter
// uploads are queued from inside the step, tile by tile, so "step" holds their packing and
// fwd_hooks only what is left of their copies; DS_OFFLOAD_OVERLAP=0 gives the path before it.
// Usage: bench_offload_hooks [--device cpu|cuda] [--stage 2|3] [--steps N] [--fp32]
//                            [--layers L]   (stage 3 = offload_param cpu, the windowed mirror)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "runtime/engine/device_mirror.h"
#include "runtime/engine/timed_hooks.h"
#include "runtime/model/model.h"
#include "runtime/tensor/ops.h"
#include "zero/zero_engine.h"

using namespace ds;
using namespace ds::runtime;

namespace {

using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

struct Args {
  std::string device = "cpu";
  int stage = 2, steps = 5, layers = 12;
  bool fp32 = false;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", k.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (k == "--device") a.device = next();
    else if (k == "--stage") a.stage = std::atoi(next().c_str());
    else if (k == "--steps") a.steps = std::atoi(next().c_str());
    else if (k == "--layers") a.layers = std::atoi(next().c_str());
    else if (k == "--fp32") a.fp32 = true;
    else {
      std::fprintf(stderr,
                   "usage: bench_offload_hooks [--device cpu|cuda] [--stage 2|3] [--steps N] "
                   "[--fp32] [--layers L]\n");
      std::exit(2);
    }
  }
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  ModelConfig cfg;
  cfg.kind = "gpt2";
  cfg.nLayer = a.layers;
  cfg.nHead = 12;
  cfg.nEmbd = 768;
  cfg.seqLen = 1024;
  cfg.vocabSize = 50257;
  cfg.paddedVocab = 50304;
  cfg.compute = a.fp32 ? DType::kF32 : DType::kBF16;
  auto host = makeModel(cfg);  // only for the parameter list and the init
  // The op model's list: its backward calls no part hook, so no param declares a backward part
  // (as OpsGpt2Model does; the mirror refuses params with parts).
  std::vector<zero::ParamInfo> params = host->params();
  for (zero::ParamInfo& p : params) p.backwardPart = 0;
  std::unique_ptr<Ops> ops = a.device == "cuda" ? makeCudaOps(0) : makeCpuOps();
  zero::ZeroOptions z;
  z.stage = a.stage;
  z.compute = cfg.compute;
  z.offloadOptimizer.device = "cpu";
  if (a.stage == 3) z.offloadParam.device = "cpu";
  zero::OptimizerOptions o;
  zero::ZeroEngine eng(params, host->numBlocks(), nullptr, z, o);
  {
    std::vector<float> init(host->numParamsTotal());
    host->initParams(init.data(), 1);
    eng.setParams(init.data());
  }
  TimedHooks timed(eng);
  DeviceMirrorOptions mo;
  mo.windowed = a.stage == 3;
  DeviceMirror mirror(
      *ops, params, cfg.compute, timed, [&eng]() -> zero::ParamTable& { return eng.table(); }, mo);
  const size_t overlapTile = connectOptimizerOverlap(eng, mirror);
  const int N = host->numBlocks();
  std::printf(
      "bench_offload_hooks on %s: GPT-2 %d layers (%zu params), %s, stage %d + offload_optimizer "
      "cpu%s, %s mirror; device params %.1f MiB, grads %.1f MiB, pinned %.1f MiB\n",
      ops->name().c_str(), a.layers, host->numParamsTotal(), a.fp32 ? "fp32" : "bf16", a.stage,
      a.stage == 3 ? " + offload_param cpu" : "", mo.windowed ? "windowed" : "resident",
      double(mirror.valueBytes()) / 1048576.0, double(mirror.gradBytes()) / 1048576.0,
      double(mirror.pinnedBytes()) / 1048576.0);
  if (overlapTile != 0)
    std::printf(
        "optimizer overlap: on, CPU Adam in tiles of %zu elements, uploads queued per tile\n",
        overlapTile);
  else std::printf("optimizer overlap: off (DS_OFFLOAD_OVERLAP=0 or the windowed mirror)\n");
  std::printf("%-5s %10s %10s %10s %10s %10s %10s\n", "step", "fwd_hooks", "(engine)", "bwd_hooks",
              "(engine)", "step", "total");
  for (int s = 0; s < a.steps; ++s) {
    const auto t0 = Clock::now();
    eng.beginStep(true);
    timed.take();
    for (int b = 0; b < N; ++b) {
      mirror.beforeForward(b);
      mirror.afterForward(b);
    }
    ops->synchronize();
    const double fwd = msSince(t0), fwdEng = timed.take();
    const auto t1 = Clock::now();
    for (int b = N - 1; b >= 0; --b) {
      mirror.beforeBackward(b);
      mirror.afterBackward(b);
    }
    const double bwd = msSince(t1), bwdEng = timed.take();
    const auto t2 = Clock::now();
    auto r = eng.step(1e-4f, 1.f, 1.f);
    mirror.invalidate();
    const double step = msSince(t2);
    std::printf("%-5d %10.1f %10.1f %10.1f %10.1f %10.1f %10.1f  (adam %.1f)\n", s + 1, fwd, fwdEng,
                bwd, bwdEng, step, msSince(t0), r.optimMs);
  }
  std::printf("uploaded %.1f MiB, downloaded %.1f MiB over %d steps\n",
              double(mirror.bytesUploaded()) / 1048576.0,
              double(mirror.bytesDownloaded()) / 1048576.0, a.steps);
  return 0;
}
