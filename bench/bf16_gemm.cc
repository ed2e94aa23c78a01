// bench_bf16_gemm: GFLOP/s of the native bf16 gemm (runtime/tensor/bf16_gemm: the AMX kernel where
// the CPU and Linux allow it, and the AVX512-BF16 kernel) vs
// what the bf16 model does without it (widen the bf16 weight to fp32, then OpenBLAS sgemm) vs
// sgemm alone on fp32 data, at GPT-2 small's linear-layer shapes: forward out = inp . W^T,
// backward dinp = dout . W and dW += dout^T . inp, for rows N = B*T, C = 768, OC in {768 (attproj),
// 2304 (qkv), 3072 (fc)} and fcproj (C = 3072, OC = 768). Operands as in the model: activations
// and dout fp32, W bf16 (rounded to bf16 inside the native pack). Per shape the three methods run
// interleaved, R times each; the median is printed. 1 and 2 threads in the same run. The amx
// column is "-" where AMX cannot run; amx/sg is AMX against sgemm on fp32 data (the fp32 peer).
// Usage: bench_bf16_gemm [--reps R] [--rows 256,512,...] [--threads 1,2]
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "runtime/tensor/bf16_convert.h"
#include "runtime/tensor/bf16_gemm.h"
#include "runtime/tensor/blas_core.h"
#include "runtime/tensor/threads.h"

using namespace ds;
using namespace ds::runtime;

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::vector<int> parseList(const std::string& s) {
  std::vector<int> v;
  std::stringstream ss(s);
  std::string x;
  while (std::getline(ss, x, ',')) v.push_back(std::atoi(x.c_str()));
  return v;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

enum Kind { kFwd, kDinp, kDw };
const char* const kKindName[] = {"fwd  out=inp.W^T", "bwd dinp=dout.W", "bwd dW+=dout^T.inp"};

struct Buffers {
  std::vector<float> inp, dout, wf, out, dinp, dw, wscratch;
  std::vector<bf16> w;
};

// One gemm of the given kind and method; returns seconds.
double runOnce(Kind kind, int method, int rows, int C, int OC, Buffers& b) {
  const double t0 = now();
  if (method == 0 || method == 3) {  // native bf16: AVX512-BF16 kernel (0) or AMX (3)
    const Bf16GemmPath path = method == 0 ? Bf16GemmPath::kNative : Bf16GemmPath::kAmx;
    switch (kind) {
      case kFwd:
        gemmBf16(rows, OC, C, f32Operand(b.inp.data(), C, 1), bf16Operand(b.w.data(), C, 1),
                 b.out.data(), OC, 0.0f, path);
        break;
      case kDinp:
        gemmBf16(rows, C, OC, f32Operand(b.dout.data(), OC, 1), bf16Operand(b.w.data(), 1, C),
                 b.dinp.data(), C, 1.0f, path);
        break;
      case kDw:
        gemmBf16(OC, C, rows, f32Operand(b.dout.data(), 1, OC), f32Operand(b.inp.data(), 1, C),
                 b.dw.data(), C, 1.0f, path);
        break;
    }
  } else {
    const float* w = b.wf.data();
    if (method == 1 && kind != kDw) {  // widen + sgemm (dW needs no weight: plain sgemm)
      bf16ToF32(b.wscratch.data(), b.w.data(), b.w.size());
      w = b.wscratch.data();
    }
    switch (kind) {
      case kFwd:
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, OC, C, 1.0f, b.inp.data(), C, w,
                    C, 0.0f, b.out.data(), OC);
        break;
      case kDinp:
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, C, OC, 1.0f, b.dout.data(), OC,
                    w, C, 1.0f, b.dinp.data(), C);
        break;
      case kDw:
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, rows, 1.0f, b.dout.data(), OC,
                    b.inp.data(), C, 1.0f, b.dw.data(), C);
        break;
    }
  }
  return now() - t0;
}

}  // namespace

int main(int argc, char** argv) {
  reexecForBlasCore(argv);  // sgemm columns on the OpenBLAS kernels dsrt runs (blas_core.h)
  int reps = 5;
  std::vector<int> rowsList = {256, 512, 1024, 2048}, threadList = {1, 2};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--reps" && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (a == "--rows" && i + 1 < argc) rowsList = parseList(argv[++i]);
    else if (a == "--threads" && i + 1 < argc) threadList = parseList(argv[++i]);
    else {
      std::fprintf(stderr, "usage: bench_bf16_gemm [--reps R] [--rows 256,512] [--threads 1,2]\n");
      return 2;
    }
  }
  const bool amx = bf16GemmAmxAvailable();
  std::printf("native AVX512-BF16: %s, AMX: %s, OpenBLAS core %s, median of %d interleaved reps\n",
              bf16GemmNativeAvailable() ? "yes" : "no (widen path)", amx ? "yes" : "no",
              blasCoreName().c_str(), reps);
  struct Layer {
    const char* name;
    int C, OC;
  };
  const Layer layers[] = {
      {"qkv", 768, 2304}, {"attproj", 768, 768}, {"fc", 768, 3072}, {"fcproj", 3072, 768}};
  std::printf("%3s %-8s %-19s %5s %5s %5s %9s %9s %9s %9s %7s %7s %7s\n", "thr", "layer", "product",
              "rows", "C", "OC", "amx", "avx512bf", "widen+sg", "sgemm32", "avx/ws", "amx/avx",
              "amx/sg");
  for (int th : threadList) {
    setComputeThreads(th);
    for (int rows : rowsList) {
      for (const Layer& l : layers) {
        Buffers b;
        const size_t wn = static_cast<size_t>(l.OC) * l.C;
        b.inp.assign(static_cast<size_t>(rows) * l.C, 0.01f);
        b.dout.assign(static_cast<size_t>(rows) * l.OC, 0.02f);
        b.wf.assign(wn, 0.03f);
        b.w.assign(wn, floatToBf16(0.03f));
        b.wscratch.assign(wn, 0.0f);
        b.out.assign(static_cast<size_t>(rows) * l.OC, 0.0f);
        b.dinp.assign(static_cast<size_t>(rows) * l.C, 0.0f);
        b.dw.assign(wn, 0.0f);
        for (Kind k : {kFwd, kDinp, kDw}) {
          std::vector<double> t[4];
          const int methods = amx ? 4 : 3;
          for (int m = 0; m < methods; ++m) runOnce(k, m, rows, l.C, l.OC, b);  // warm
          for (int r = 0; r < reps; ++r) {
            for (int m = 0; m < methods; ++m) t[m].push_back(runOnce(k, m, rows, l.C, l.OC, b));
          }
          const double fl = 2.0 * rows * l.C * l.OC / 1e9;
          const double g0 = fl / median(t[0]), g1 = fl / median(t[1]), g2 = fl / median(t[2]);
          if (amx) {
            const double g3 = fl / median(t[3]);
            std::printf("%3d %-8s %-19s %5d %5d %5d %9.1f %9.1f %9.1f %9.1f %7.2f %7.2f %7.2f\n",
                        th, l.name, kKindName[k], rows, l.C, l.OC, g3, g0, g1, g2, g0 / g1, g3 / g0,
                        g3 / g2);
          } else {
            std::printf("%3d %-8s %-19s %5d %5d %5d %9s %9.1f %9.1f %9.1f %7.2f %7s %7s\n", th,
                        l.name, kKindName[k], rows, l.C, l.OC, "-", g0, g1, g2, g0 / g1, "-", "-");
          }
          std::fflush(stdout);
        }
      }
    }
  }
  return 0;
}
