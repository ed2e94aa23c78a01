// bench_inference_bench: dsrt generate's decoder (runtime/inference) against the machine's limits
// measured in the same run, for issue 19 item 6 (bench/inference_bench.sh adds PyTorch beside it).
//   bandwidth: STREAM-style read (sum) and triad (a = b + s c) over arrays of --stream_mb MB each
//              (far larger than the last-level cache), best of --reps: vectorised with the gemv
//              kernels' ISA (AVX-512 / AVX2, four independent accumulators, so the adds never
//              bound it) and split over the compute threads as our kernels are (one OpenMP team of
//              computeThreads(), contiguous chunks);
//   sgemm peak: our sgemm (runtime/tensor/sgemm.h: the GEMM split over the same team, OpenBLAS one
//              thread per call) on 2048^3, best of --reps, after re-executing with the OpenBLAS
//              core dsrt uses (runtime/tensor/blas_core.h), so the peak is of the kernels the
//              decoder and prefill run;
//   decode:    per --dtype and batch, sequences prefilled with --prompt tokens, then --steps
//              batched decode steps timed (best of --reps). Batch-1 bytes per token = weights read
//              per step (every matrix incl. the tied head once, the vectors, one wpe row), and
//              the bandwidth limit = those bytes / the read bandwidth;
//   prefill:   one --prefill token prompt, tokens/s and GFLOP/s against the sgemm peak.
// Also times batch 1 with gemv off (the gemm path, --ab) and with gemv forced on, to show what the
// gemv kernels bring against the gemm the default may pick (bf16 on AMX: the gemm).
// Under dsrun with WORLD_SIZE T > 1 (bench/inference_bench.sh runs it so): tensor-parallel decode
// only, each rank holding its shard (runtime/inference/tensor_parallel.h) and all ranks making the
// same calls; rank 0 prints "tp T" lines. No bandwidth or sgemm probe there (the 1-rank run of the
// same script measures them).
// Random GPT-2 weights (default 124M shapes). Not a correctness check (tests/runtime/inference).
#include <immintrin.h>
#include <omp.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "comm/bootstrap.h"
#include "comm/process_group.h"
#include "core/env.h"
#include "core/rank_env.h"
#include "runtime/data/rng.h"
#include "runtime/inference/decoder.h"
#include "runtime/inference/inference_model.h"
#include "runtime/model/gpt2_layout.h"
#include "runtime/tensor/blas_core.h"
#include "runtime/tensor/gemv.h"
#include "runtime/tensor/matmul_bf16.h"
#include "runtime/tensor/sgemm.h"
#include "runtime/tensor/threads.h"

using namespace ds::runtime;

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Bandwidth {
  double read = 0, triad = 0;  // GB/s
};

// Sum of p[0, n): four independent vector accumulators, so the loop waits on memory, not on
// the add latency (a single scalar chain read at a third of the bandwidth: bench/results
// inference.txt, 2026-11-27).
__attribute__((target("avx512f"))) float sumAvx512(const float* p, size_t n) {
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    a0 = _mm512_add_ps(a0, _mm512_loadu_ps(p + i));
    a1 = _mm512_add_ps(a1, _mm512_loadu_ps(p + i + 16));
    a2 = _mm512_add_ps(a2, _mm512_loadu_ps(p + i + 32));
    a3 = _mm512_add_ps(a3, _mm512_loadu_ps(p + i + 48));
  }
  alignas(64) float lanes[16];  // not _mm512_reduce_add_ps: GCC 12 warns inside it
  _mm512_store_ps(lanes, _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
  float s = 0;
  for (float v : lanes) s += v;
  for (; i < n; ++i) s += p[i];
  return s;
}

__attribute__((target("avx2"))) float sumAvx2(const float* p, size_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm256_add_ps(a0, _mm256_loadu_ps(p + i));
    a1 = _mm256_add_ps(a1, _mm256_loadu_ps(p + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_loadu_ps(p + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_loadu_ps(p + i + 24));
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  float s = 0;
  for (float v : lanes) s += v;
  for (; i < n; ++i) s += p[i];
  return s;
}

float sumScalar(const float* p, size_t n) {
  float acc[8] = {};
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (size_t k = 0; k < 8; ++k) acc[k] += p[i + k];
  float s = 0;
  for (float v : acc) s += v;
  for (; i < n; ++i) s += p[i];
  return s;
}

// a = b + 3 c over [0, n).
__attribute__((target("avx512f"))) void triadAvx512(float* a, const float* b, const float* c,
                                                    size_t n) {
  const __m512 three = _mm512_set1_ps(3.0f);
  size_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(a + i, _mm512_fmadd_ps(three, _mm512_loadu_ps(c + i), _mm512_loadu_ps(b + i)));
  for (; i < n; ++i) a[i] = b[i] + 3.0f * c[i];
}

__attribute__((target("avx2,fma"))) void triadAvx2(float* a, const float* b, const float* c,
                                                   size_t n) {
  const __m256 three = _mm256_set1_ps(3.0f);
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(a + i, _mm256_fmadd_ps(three, _mm256_loadu_ps(c + i), _mm256_loadu_ps(b + i)));
  for (; i < n; ++i) a[i] = b[i] + 3.0f * c[i];
}

void triadScalar(float* a, const float* b, const float* c, size_t n) {
  for (size_t i = 0; i < n; ++i) a[i] = b[i] + 3.0f * c[i];
}

// Thread t of the team's contiguous chunk of [0, n), as the kernels split rows.
void chunk(size_t n, size_t& begin, size_t& end) {
  const auto team = static_cast<size_t>(omp_get_num_threads());
  const auto t = static_cast<size_t>(omp_get_thread_num());
  begin = n * t / team;
  end = n * (t + 1) / team;
}

Bandwidth stream(size_t mb, int reps, ds::runtime::GemvIsa isa) {
  using ds::runtime::GemvIsa;
  const size_t n = mb * 1000 * 1000 / sizeof(float);
  std::vector<float> a(n), b(n), c(n);
  const int team = computeThreads();
#pragma omp parallel num_threads(team)
  {
    size_t begin = 0, end = 0;
    chunk(n, begin, end);  // first touch by the thread that reads the chunk later
    for (size_t i = begin; i < end; ++i) {
      a[i] = 0.0f;
      b[i] = 1.0f;
      c[i] = 2.0f;
    }
  }
  auto sum = isa == GemvIsa::kAvx512 ? sumAvx512 : isa == GemvIsa::kAvx2 ? sumAvx2 : sumScalar;
  auto triad = isa == GemvIsa::kAvx512 ? triadAvx512
               : isa == GemvIsa::kAvx2 ? triadAvx2
                                       : triadScalar;
  Bandwidth bw;
  volatile float sink = 0;
  for (int r = 0; r < reps + 1; ++r) {  // the first pass warms the pages and the team
    double t0 = now();
    float s = 0;
#pragma omp parallel num_threads(team) reduction(+ : s)
    {
      size_t begin = 0, end = 0;
      chunk(n, begin, end);
      s += sum(b.data() + begin, end - begin);
    }
    double t = now() - t0;
    sink = sink + s;
    if (r > 0) bw.read = std::max(bw.read, double(n) * sizeof(float) / t / 1e9);
    t0 = now();
#pragma omp parallel num_threads(team)
    {
      size_t begin = 0, end = 0;
      chunk(n, begin, end);
      triad(a.data() + begin, b.data() + begin, c.data() + begin, end - begin);
    }
    t = now() - t0;
    if (r > 0) bw.triad = std::max(bw.triad, 3.0 * double(n) * sizeof(float) / t / 1e9);
  }
  return bw;
}

double sgemmPeak(int reps) {
  const int n = 2048;
  std::vector<float> a(size_t(n) * n, 0.5f), b(size_t(n) * n, 0.25f), c(size_t(n) * n);
  double best = 0;
  for (int r = 0; r < reps + 1; ++r) {
    const double t0 = now();
    sgemm(false, true, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    const double t = now() - t0;
    if (r > 0) best = std::max(best, 2.0 * n * n * double(n) / t / 1e9);
  }
  return best;
}

// Bytes one decode step reads of the weights: every tensor once except wpe (one row).
double stepWeightBytes(const ModelConfig& cfg, ds::DType dt) {
  double bytes = 0;
  for (const auto& p : makeModel(cfg)->params()) {
    const bool matrix = p.shape.size() == 2 && p.name != "wpe";
    if (p.name == "wpe") bytes += 4.0 * cfg.nEmbd;
    else bytes += double(p.numel) * (matrix && dt == ds::DType::kBF16 ? 2 : 4);
  }
  return bytes;
}

// Seconds per batch-1 step of gemv alone: the step's matrices (per layer qkv, attproj, fc, fcproj,
// then the tied head) through the decoder's batch-1 gemv one after another, nothing else (best
// of reps, after one warm pass): what the weight-streaming kernels reach without the rest of the
// decoder. Bytes: those matrices, the bulk of stepWeightBytes.
double gemvAloneStep(const InferenceModel& m, int reps, double& bytes) {
  using namespace ds::runtime::gpt2;
  const ModelConfig& cfg = m.config();
  const int C = cfg.nEmbd, V = cfg.vocabSize;
  struct Mat {
    int param, cin, cout;
  };
  std::vector<Mat> mats;
  for (int l = 0; l < cfg.nLayer; ++l) {
    mats.push_back({m.layerParam(kQkvw, l), C, 3 * C});
    mats.push_back({m.layerParam(kAttprojw, l), C, C});
    mats.push_back({m.layerParam(kFcw, l), C, 4 * C});
    mats.push_back({m.layerParam(kFcprojw, l), 4 * C, C});
  }
  mats.push_back({0, C, V});
  const bool b16 = m.dtype() == ds::DType::kBF16;
  bytes = 0;
  for (const Mat& mat : mats) bytes += double(mat.cin) * mat.cout * (b16 ? 2 : 4);
  std::vector<float> in(static_cast<size_t>(4 * C), 0.01f), out(static_cast<size_t>(V));
  double best = 1e30;
  for (int r = 0; r < reps + 1; ++r) {
    const double t0 = now();
    for (const Mat& mat : mats) {
      if (b16 && bf16LinearNative() && gemvBf16DotSupported())  // as the decoder's batch 1
        gemvForwardBf16Dot(out.data(), in.data(), m.b16(mat.param), nullptr, 1, mat.cin, mat.cout);
      else if (b16)
        gemvForwardBf16(out.data(), in.data(), m.b16(mat.param), nullptr, 1, mat.cin, mat.cout);
      else gemvForward(out.data(), in.data(), m.f32(mat.param), nullptr, 1, mat.cin, mat.cout);
    }
    if (r > 0) best = std::min(best, now() - t0);
  }
  return best;
}

// Seconds per decode step at batch B (best of reps).
double decodeStep(const InferenceModel& m, int B, int prompt, int steps, int reps,
                  const DecoderOptions& opts, SplitMix64& rng) {
  const ModelConfig& cfg = m.config();
  double best = 1e30;
  std::vector<float> logits(size_t(B) * size_t(cfg.vocabSize));
  for (int r = 0; r < reps; ++r) {
    Decoder dec(m, B, opts);
    std::vector<int32_t> toks(static_cast<size_t>(prompt));
    for (int b = 0; b < B; ++b) {
      for (auto& t : toks) t = int32_t(rng.below(uint64_t(cfg.vocabSize)));
      const std::vector<int> slots(size_t(prompt), b);
      std::vector<bool> rows(size_t(prompt), false);
      rows.back() = true;
      dec.forward(slots.data(), toks.data(), prompt, rows, logits.data());
    }
    std::vector<int> slots(static_cast<size_t>(B));
    std::vector<int32_t> next(static_cast<size_t>(B));
    for (int b = 0; b < B; ++b) slots[size_t(b)] = b;
    dec.forward(slots.data(), next.data(), B, {}, logits.data());  // warm-up step
    const double t0 = now();
    for (int s = 0; s < steps; ++s) {
      for (auto& t : next) t = int32_t(rng.below(uint64_t(cfg.vocabSize)));
      dec.forward(slots.data(), next.data(), B, {}, logits.data());
    }
    best = std::min(best, (now() - t0) / steps);
  }
  return best;
}

double prefillSeconds(const InferenceModel& m, int T, int reps, SplitMix64& rng) {
  const ModelConfig& cfg = m.config();
  std::vector<float> logits(size_t(cfg.vocabSize));
  std::vector<int32_t> toks(static_cast<size_t>(T));
  const std::vector<int> slots(size_t(T), 0);
  std::vector<bool> rows(size_t(T), false);
  rows.back() = true;
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    Decoder dec(m, 1);
    for (auto& t : toks) t = int32_t(rng.below(uint64_t(cfg.vocabSize)));
    const double t0 = now();
    dec.forward(slots.data(), toks.data(), T, rows, logits.data());
    best = std::min(best, now() - t0);
  }
  return best;
}

// Tensor-parallel decode under dsrun (WORLD_SIZE > 1): every rank builds the same random model,
// keeps its shard, and times the same decode calls (the same seed: the same tokens); rank 0 prints.
int tensorParallel(const ModelConfig& cfg, const std::vector<float>& flat0,
                   const std::vector<std::string>& dtypes, const std::vector<int>& batches,
                   int prompt, int steps, int reps) {
  const ds::EnvMap env = ds::currentEnv();
  const ds::RankEnv re = ds::deriveRankEnv(env);
  ds::comm::BootstrapOptions bo;
  bo.env = env;
  const auto group = ds::comm::bootstrap(bo);
  const bool print = re.rank == 0;
  if (print)
    std::printf("tp %d ranks, threads %d per rank, gemv isa %s, blas core %s, comm %s\n",
                re.worldSize, computeThreads(), gemvIsaName(gemvBestIsa()), blasCoreName().c_str(),
                group->backendName().c_str());
  for (const std::string& dtype : dtypes) {
    const ds::DType dt = dtype == "bf16" ? ds::DType::kBF16 : ds::DType::kF32;
    const InferenceModel m(cfg, flat0, dt, TpShard{re.rank, re.worldSize});
    if (print)
      std::printf("tp %s: %.1f MB of weights held per rank\n", dtype.c_str(),
                  double(m.heldBytes()) / 1e6);
    for (int B : batches) {
      SplitMix64 rng(7);  // the same on every rank
      DecoderOptions opts;
      opts.group = group.get();
      const double sec = decodeStep(m, B, prompt, steps, reps, opts, rng);
      if (print)
        std::printf("  tp decode %s batch %2d: %8.1f tokens/s  %7.2f ms/step\n", dtype.c_str(), B,
                    B / sec, sec * 1e3);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  reexecForBlasCore(argv);  // the OpenBLAS kernels dsrt runs (runtime/tensor/blas_core.h)
  CLI::App app{"dsrt generate's decoder against bandwidth and sgemm limits"};
  ModelConfig cfg;
  cfg.nLayer = 12;
  cfg.nHead = 12;
  cfg.nEmbd = 768;
  cfg.seqLen = 1024;
  cfg.vocabSize = 50257;
  cfg.paddedVocab = 50304;
  std::vector<int> batches = {1, 16};
  std::vector<std::string> dtypes = {"fp32", "bf16"};
  int prompt = 64, steps = 16, reps = 3, threads = 0, prefill = 512;
  size_t streamMb = 1024;
  bool ab = true;
  app.add_option("--n_layer", cfg.nLayer)->capture_default_str();
  app.add_option("--n_head", cfg.nHead)->capture_default_str();
  app.add_option("--n_embd", cfg.nEmbd)->capture_default_str();
  app.add_option("--seq_len", cfg.seqLen)->capture_default_str();
  app.add_option("--vocab_size", cfg.vocabSize)->capture_default_str();
  app.add_option("--padded_vocab", cfg.paddedVocab)->capture_default_str();
  app.add_option("--batch", batches, "batch sizes to time")->capture_default_str();
  app.add_option("--dtype", dtypes, "fp32 and/or bf16")->capture_default_str();
  app.add_option("--prompt", prompt, "prompt tokens per sequence before decode")
      ->capture_default_str();
  app.add_option("--steps", steps, "decode steps timed")->capture_default_str();
  app.add_option("--prefill", prefill, "prompt length of the prefill timing (0: skip)")
      ->capture_default_str();
  app.add_option("--reps", reps, "repetitions (best is printed)")->capture_default_str();
  app.add_option("--stream_mb", streamMb, "MB per STREAM array")->capture_default_str();
  app.add_option("--ab", ab, "also time batch 1 with gemv off (sgemm)")->capture_default_str();
  app.add_option("--threads", threads, "compute threads (default OpenMP's)");
  int localRank = -1;
  app.add_option("--local_rank", localRank,
                 "set by dsrun (tensor-parallel: the rank comes from the environment)");
  CLI11_PARSE(app, argc, argv);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // figures appear as measured (slow on a busy machine)
  if (threads > 0) setComputeThreads(threads);
  if (prompt + steps + 1 > cfg.seqLen || prefill > cfg.seqLen) {
    std::fprintf(stderr, "--prompt/--steps/--prefill exceed --seq_len %d\n", cfg.seqLen);
    return 2;
  }
  auto model = makeModel(cfg);
  std::vector<float> flat0(model->numParamsTotal());
  model->initParams(flat0.data(), 1);
  if (ds::deriveRankEnv(ds::currentEnv()).worldSize > 1)
    return tensorParallel(cfg, flat0, dtypes, batches, prompt, steps, reps);
  const Bandwidth bw = stream(streamMb, reps, gemvBestIsa());
  const double peak = sgemmPeak(reps);
  std::printf("threads %d, gemv isa %s, blas core %s\n", computeThreads(),
              gemvIsaName(gemvBestIsa()), blasCoreName().c_str());
  std::printf(
      "bandwidth: read %.1f GB/s, triad %.1f GB/s (%zu MB arrays, %s, %d threads); sgemm "
      "2048^3 %.1f GFLOP/s (ours: %d threads, OpenBLAS %s)\n",
      bw.read, bw.triad, streamMb, gemvIsaName(gemvBestIsa()), computeThreads(), peak,
      computeThreads(), blasCoreName().c_str());
  // Prefill FLOPs: 2 per weight of every block linear per token, the head for the last row only,
  // and causal attention (QK^T and AV over half the T x T square).
  const double C = cfg.nEmbd, L = cfg.nLayer;
  const double blockFlops = 2.0 * L * 12 * C * C, headFlops = 2.0 * C * cfg.vocabSize;
  SplitMix64 rng(3);
  for (const std::string& dtype : dtypes) {
    const ds::DType dt = dtype == "bf16" ? ds::DType::kBF16 : ds::DType::kF32;
    const InferenceModel m(cfg, flat0, dt);
    const double bytes = stepWeightBytes(cfg, dt);
    const double limit = bw.read * 1e9 / bytes;
    std::printf(
        "%s: weights %.1f MB read per decode step; bandwidth limit at batch 1 %.1f "
        "tokens/s\n",
        dtype.c_str(), bytes / 1e6, limit);
    for (int B : batches) {
      const double s = decodeStep(m, B, prompt, steps, reps, {}, rng);
      std::printf(
          "  decode %s batch %2d: %8.1f tokens/s  %7.2f ms/step  weights %5.1f GB/s  "
          "%.2f of the bandwidth limit\n",
          dtype.c_str(), B, B / s, s * 1e3, bytes / s / 1e9, B == 1 ? 1.0 / (limit * s) : 0.0);
      if (B == 1 && ab) {
        double gemvBytes = 0;
        const double gs = gemvAloneStep(m, reps, gemvBytes);
        std::printf(
            "  gemv alone %s batch  1: %7.2f ms/step  %5.1f GB/s  %.2f of the read bandwidth (the "
            "step's %.1f MB of matrices, nothing else)\n",
            dtype.c_str(), gs * 1e3, gemvBytes / gs / 1e9, gemvBytes / gs / 1e9 / bw.read,
            gemvBytes / 1e6);
        const double t = decodeStep(m, 1, prompt, steps, reps, DecoderOptions{0, 0}, rng);
        const double g = decodeStep(m, 1, prompt, steps, reps, DecoderOptions{4, 16}, rng);
        std::printf(
            "  decode %s batch  1 gemm path (gemv off): %8.1f tokens/s, gemv path %8.1f "
            "tokens/s (gemv %.2fx the gemm path)\n",
            dtype.c_str(), 1 / t, 1 / g, t / g);
      }
    }
    if (prefill > 0) {
      const double s = prefillSeconds(m, prefill, reps, rng);
      const double attn = 2.0 * 2.0 * L * C * 0.5 * prefill * prefill;  // QK^T and AV, causal
      const double gf = (blockFlops * prefill + headFlops + attn) / s / 1e9;
      std::printf(
          "  prefill %s %d tokens: %8.1f tokens/s  %.1f GFLOP/s  %.2f of the sgemm "
          "peak\n",
          dtype.c_str(), prefill, prefill / s, gf, gf / peak);
    }
  }
  return 0;
}
