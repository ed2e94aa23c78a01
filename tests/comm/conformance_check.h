// Conformance checks shared by the thread and process variants of the suite: deterministic
// inputs, a reference computed here (never by the backend), and one function that runs every
// collective on one rank and returns what went wrong as text (empty = conforming). Rank bodies
// must not use Catch2 macros (not thread-safe, and forked children _exit); callers assert.
// Inputs are small integers, so fp32/fp16/bf16 sums are exact and results compare exactly
// (avg gets a tolerance of a few ulps, since backends may divide differently). The exception is
// runHalfAccumulation: inputs where a 16-bit running sum loses what an fp32 accumulator keeps.
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "comm/process_group.h"
#include "core/dtype.h"

namespace ds::test::conformance {

using comm::BufferView;
using comm::ProcessGroup;
using comm::ReduceOp;

inline const std::vector<DType>& allDtypes() {
  static const std::vector<DType> v{DType::kF32, DType::kF16, DType::kBF16, DType::kI32,
                                    DType::kI64};
  return v;
}
inline const std::vector<ReduceOp>& allOps() {
  static const std::vector<ReduceOp> v{ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax,
                                       ReduceOp::kMin};
  return v;
}

// The input of rank r at element i: an integer in [-5, 5].
inline double inputValue(int r, size_t i) {
  return static_cast<double>(static_cast<int>((r * 7 + i * 3 + i / 5) % 11) - 5);
}

// A typed host buffer with element access through double.
class Buf {
 public:
  Buf(DType t, size_t n) : t_(t), n_(n), bytes_(n * dtypeSize(t) + 1) {}
  void set(size_t i, double v) {
    char* p = bytes_.data() + i * dtypeSize(t_);
    switch (t_) {
      case DType::kF32: {
        float f = static_cast<float>(v);
        std::memcpy(p, &f, 4);
        break;
      }
      case DType::kF16: {
        auto h = floatToFp16(static_cast<float>(v));
        std::memcpy(p, &h, 2);
        break;
      }
      case DType::kBF16: {
        auto h = floatToBf16(static_cast<float>(v));
        std::memcpy(p, &h, 2);
        break;
      }
      case DType::kI32: {
        int32_t x = static_cast<int32_t>(v);
        std::memcpy(p, &x, 4);
        break;
      }
      case DType::kI64: {
        int64_t x = static_cast<int64_t>(v);
        std::memcpy(p, &x, 8);
        break;
      }
      default: break;
    }
  }
  double get(size_t i) const {
    const char* p = bytes_.data() + i * dtypeSize(t_);
    switch (t_) {
      case DType::kF32: {
        float f;
        std::memcpy(&f, p, 4);
        return f;
      }
      case DType::kF16: {
        fp16 h;
        std::memcpy(&h, p, 2);
        return fp16ToFloat(h);
      }
      case DType::kBF16: {
        bf16 h;
        std::memcpy(&h, p, 2);
        return bf16ToFloat(h);
      }
      case DType::kI32: {
        int32_t x;
        std::memcpy(&x, p, 4);
        return x;
      }
      case DType::kI64: {
        int64_t x;
        std::memcpy(&x, p, 8);
        return static_cast<double>(x);
      }
      default: return 0;
    }
  }
  // A view of elements [off, off+n).
  BufferView view(size_t off, size_t n) {
    return {bytes_.data() + off * dtypeSize(t_), n, t_, comm::Device::kCpu};
  }
  BufferView view() { return view(0, n_); }
  size_t size() const { return n_; }

 private:
  DType t_;
  size_t n_;
  std::vector<char> bytes_;
};

// The reference of op over inputValue(0..n-1, i), rounded to dtype t as a backend must.
inline double reference(DType t, ReduceOp op, int n, size_t i) {
  double acc = inputValue(0, i);
  for (int r = 1; r < n; ++r) {
    double v = inputValue(r, i);
    if (op == ReduceOp::kMax) acc = std::max(acc, v);
    else if (op == ReduceOp::kMin) acc = std::min(acc, v);
    else acc += v;
  }
  if (op == ReduceOp::kAvg) {
    if (t == DType::kI32 || t == DType::kI64) {
      acc = static_cast<double>(static_cast<int64_t>(acc) / n);
    } else {
      acc = static_cast<float>(acc) / static_cast<float>(n);
    }
  }
  Buf one(t, 1);
  one.set(0, acc);
  return one.get(0);
}

inline bool close(DType t, ReduceOp op, double got, double want) {
  if (got == want) return true;
  if (op != ReduceOp::kAvg || t == DType::kI32 || t == DType::kI64) return false;
  double ulp = t == DType::kF32 ? 1e-6 : (t == DType::kF16 ? 1e-3 : 8e-3);
  return std::fabs(got - want) <= ulp * std::max(1.0, std::fabs(want));
}

// Uneven block layout for reduce_scatter/allgather: block i has count/n + i elements (so block
// sizes always differ, and count 0 still gives an empty block 0).
inline std::vector<size_t> unevenCounts(size_t count, int n) {
  std::vector<size_t> c(n);
  for (int i = 0; i < n; ++i) c[i] = count / n + i;
  return c;
}

// Collects up to a few mismatches per collective into `errs`.
class Report {
 public:
  explicit Report(std::string* errs) : errs_(errs) {}
  void mismatch(const std::string& what, size_t i, double got, double want) {
    if (++count_ <= 3) *errs_ += fmt::format("{}: element {} = {}, want {}\n", what, i, got, want);
  }

 private:
  std::string* errs_;
  int count_ = 0;
};

inline std::string caseName(const char* coll, const ProcessGroup& pg, DType t, ReduceOp op,
                            size_t count) {
  return fmt::format("{} {} rank {}/{} {} {} count {}", pg.backendName(), coll, pg.rank(),
                     pg.size(), dtypeName(t), comm::reduceOpName(op), count);
}

// fp32 accumulation of fp16/bf16: element i of rank r is `big` when r == i % n, else 1, with
// big = 2048 (fp16) or 256 (bf16), where the spacing of the 16-bit type is 2. A running sum kept
// in the 16-bit type sticks at big (big + 1 rounds back to big, ties to even) whenever big comes
// first in the summation order; an fp32 accumulator gives big + n - 1, rounded once at the end.
// Every rank is `big` for some element, so whatever order a backend sums in, some element starts
// with it. From n = 3 on the two results differ.
inline double halfAccBig(DType t) { return t == DType::kF16 ? 2048.0 : 256.0; }
inline double halfAccInput(DType t, int r, int n, size_t i) {
  return r == static_cast<int>(i % static_cast<size_t>(n)) ? halfAccBig(t) : 1.0;
}

// The reference: summed in fp32, divided in fp32 for avg, rounded to t once.
inline double halfAccReference(DType t, ReduceOp op, int n) {
  float acc = static_cast<float>(halfAccBig(t)) + static_cast<float>(n - 1);
  if (op == ReduceOp::kAvg) acc /= static_cast<float>(n);
  return t == DType::kF16 ? fp16ToFloat(floatToFp16(acc)) : bf16ToFloat(floatToBf16(acc));
}

// What a 16-bit running sum gives when big comes first (the failure the check must see).
inline double halfAccRunningSum(DType t, int n) {
  auto round = [t](float v) -> float {
    return t == DType::kF16 ? fp16ToFloat(floatToFp16(v)) : bf16ToFloat(floatToBf16(v));
  };
  float acc = round(static_cast<float>(halfAccBig(t)));
  for (int r = 1; r < n; ++r) acc = round(acc + 1.0f);
  return acc;
}

// allreduce, reduce_scatter (uneven blocks) and reduce with sum and avg over the inputs above.
inline std::string runHalfAccumulation(ProcessGroup& pg, DType t, size_t count = 1031) {
  const int n = pg.size(), r = pg.rank();
  std::string errs;
  auto fill = [&](Buf& b, size_t off = 0) {
    for (size_t i = 0; i < b.size(); ++i) b.set(i, halfAccInput(t, r, n, off + i));
  };
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
    const double want = halfAccReference(t, op, n);
    {
      Buf b(t, count);
      fill(b);
      pg.allreduce(b.view(), op)->wait();
      Report rep(&errs);
      for (size_t i = 0; i < count; ++i)
        if (!close(t, op, b.get(i), want))
          rep.mismatch(caseName("fp32-accumulation allreduce", pg, t, op, count), i, b.get(i),
                       want);
    }
    {
      auto cs = unevenCounts(count, n);
      size_t total = 0;
      for (auto c : cs) total += c;
      Buf in(t, total), out(t, cs[r]);
      fill(in);
      pg.reduceScatter(in.view(), out.view(), cs, op)->wait();
      Report rep(&errs);
      for (size_t i = 0; i < cs[r]; ++i)
        if (!close(t, op, out.get(i), want))
          rep.mismatch(caseName("fp32-accumulation reduce_scatter", pg, t, op, total), i,
                       out.get(i), want);
    }
    {
      const int root = n - 1;
      Buf b(t, count);
      fill(b);
      pg.reduce(b.view(), root, op)->wait();
      Report rep(&errs);
      if (r == root)
        for (size_t i = 0; i < count; ++i)
          if (!close(t, op, b.get(i), want))
            rep.mismatch(caseName("fp32-accumulation reduce", pg, t, op, count), i, b.get(i), want);
    }
  }
  return errs;
}

// Runs allreduce, reduce_scatter, reduce, and (for the first op) allgather, broadcast, send/recv
// and barrier for every (dtype, op, count) on this rank, plus runHalfAccumulation for each 16-bit
// dtype (so every caller, the mpi rank body included, checks fp32 accumulation). Returns the
// failures, or "". withP2P false leaves send/recv out (nccl takes host buffers for collectives
// only).
inline std::string runAll(ProcessGroup& pg, const std::vector<DType>& dtypes,
                          const std::vector<ReduceOp>& ops, const std::vector<size_t>& counts,
                          bool withP2P = true) {
  const int n = pg.size(), r = pg.rank();
  std::string errs;
  auto fill = [&](Buf& b, int rank, size_t off = 0) {
    for (size_t i = 0; i < b.size(); ++i) b.set(i, inputValue(rank, off + i));
  };
  for (DType t : dtypes) {
    for (size_t count : counts) {
      for (ReduceOp op : ops) {
        {  // allreduce, in place
          Buf b(t, count);
          fill(b, r);
          pg.allreduce(b.view(), op)->wait();
          Report rep(&errs);
          for (size_t i = 0; i < count; ++i) {
            double want = reference(t, op, n, i);
            if (!close(t, op, b.get(i), want)) {
              rep.mismatch(caseName("allreduce", pg, t, op, count), i, b.get(i), want);
            }
          }
        }
        {  // reduce_scatter, uneven blocks
          auto cs = unevenCounts(count, n);
          size_t total = 0, off = 0;
          for (int i = 0; i < n; ++i) {
            if (i < r) off += cs[i];
            total += cs[i];
          }
          Buf in(t, total), out(t, cs[r]);
          fill(in, r);
          pg.reduceScatter(in.view(), out.view(), cs, op)->wait();
          Report rep(&errs);
          for (size_t i = 0; i < cs[r]; ++i) {
            double want = reference(t, op, n, off + i);
            if (!close(t, op, out.get(i), want)) {
              rep.mismatch(caseName("reduce_scatter", pg, t, op, total), i, out.get(i), want);
            }
          }
          for (size_t i = 0; i < total; ++i) {  // input untouched
            if (in.get(i) != inputValue(r, i)) {
              rep.mismatch(caseName("reduce_scatter input", pg, t, op, total), i, in.get(i),
                           inputValue(r, i));
            }
          }
        }
        {  // reduce to a root that moves with the count
          int root = static_cast<int>(count % n);
          Buf b(t, count);
          fill(b, r);
          pg.reduce(b.view(), root, op)->wait();
          if (r == root) {
            Report rep(&errs);
            for (size_t i = 0; i < count; ++i) {
              double want = reference(t, op, n, i);
              if (!close(t, op, b.get(i), want)) {
                rep.mismatch(caseName("reduce", pg, t, op, count), i, b.get(i), want);
              }
            }
          }
        }
      }
      {  // allgather, uneven blocks
        auto cs = unevenCounts(count, n);
        size_t total = 0;
        for (auto c : cs) total += c;
        Buf in(t, cs[r]), out(t, total);
        fill(in, r);
        pg.allgather(in.view(), out.view(), cs)->wait();
        Report rep(&errs);
        size_t off = 0;
        for (int p = 0; p < n; ++p) {
          for (size_t i = 0; i < cs[p]; ++i) {
            if (out.get(off + i) != inputValue(p, i)) {
              rep.mismatch(caseName("allgather", pg, t, ReduceOp::kSum, total), off + i,
                           out.get(off + i), inputValue(p, i));
            }
          }
          off += cs[p];
        }
      }
      {  // broadcast
        int root = static_cast<int>((count + 1) % n);
        Buf b(t, count);
        fill(b, r);
        pg.broadcast(b.view(), root)->wait();
        Report rep(&errs);
        for (size_t i = 0; i < count; ++i) {
          if (b.get(i) != inputValue(root, i)) {
            rep.mismatch(caseName("broadcast", pg, t, ReduceOp::kSum, count), i, b.get(i),
                         inputValue(root, i));
          }
        }
      }
      if (n > 1 && withP2P) {  // send/recv around the ring, both posted before either waits
        Buf out(t, count), in(t, count);
        fill(out, r);
        int tag = static_cast<int>(count % 1000);
        auto rw = pg.recv(in.view(), (r + n - 1) % n, tag);
        auto sw = pg.send(out.view(), (r + 1) % n, tag);
        rw->wait();
        sw->wait();
        Report rep(&errs);
        int from = (r + n - 1) % n;
        for (size_t i = 0; i < count; ++i) {
          if (in.get(i) != inputValue(from, i)) {
            rep.mismatch(caseName("recv", pg, t, ReduceOp::kSum, count), i, in.get(i),
                         inputValue(from, i));
          }
        }
      }
      pg.barrier()->wait();
    }
    if (t == DType::kF16 || t == DType::kBF16) errs += runHalfAccumulation(pg, t);
  }
  return errs;
}

}  // namespace ds::test::conformance
