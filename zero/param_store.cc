// ParamStore variants: MemoryParamStore (fp32 or 16-bit vector) and NvmeParamStore (ParamSwap).
#include "zero/param_store.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "zero/engine_trace.h"
#include "zero/param_swap.h"

namespace ds::zero {
namespace {

class MemoryParamStore final : public ParamStore {
 public:
  MemoryParamStore(DType compute, size_t localSize) : compute_(compute) {
    if (compute_ != DType::kF32) values16_.assign(localSize, 0);
    else values32_.assign(localSize, 0.f);
  }

  void write(size_t offset, size_t count, const float* values) override {
    if (half()) convertTo16(values, {compute_, values16_.data() + offset}, count);
    else std::memcpy(values32_.data() + offset, values, count * sizeof(float));
  }

  void writeChunk(size_t offset, size_t chunk, const float* values, size_t real) override {
    if (half()) {
      std::fill(values16_.begin() + long(offset), values16_.begin() + long(offset + chunk), 0);
      convertTo16(values, {compute_, values16_.data() + offset}, real);
    } else {
      std::fill(values32_.begin() + long(offset), values32_.begin() + long(offset + chunk), 0.f);
      std::memcpy(values32_.data() + offset, values, real * sizeof(float));
    }
  }

  const void* gatherInput(size_t /*param*/, size_t offset, size_t /*count*/,
                          void* /*rankBlock*/) override {
    if (half()) return values16_.data() + offset;
    return values32_.data() + offset;
  }

  float* masterAlias() override { return half() ? nullptr : values32_.data(); }

  ModelParamSink sink(bool masterOwned) override {
    ModelParamSink out;
    float* copy32 = nullptr;  // model fp32 params fed from a separate master
    if (half()) out.out16 = {compute_, values16_.data()};
    else if (masterOwned) copy32 = values32_.data();
    out.afterTile = [copy32](size_t offset, size_t count, const float* master) {
      if (copy32) std::memcpy(copy32 + offset, master, count * sizeof(float));
    };
    return out;
  }

  void addMemory(MemoryReport& report, MemPlace place) const override {
    addBytes(report, MemKind::kParams, place,
             values32_.size() * sizeof(float) + values16_.size() * sizeof(uint16_t));
  }

 private:
  bool half() const { return compute_ != DType::kF32; }
  DType compute_;
  std::vector<float> values32_;
  std::vector<uint16_t> values16_;
};

class NvmeParamStore final : public ParamStore {
 public:
  NvmeParamStore(const OffloadOptions& offload, DType compute, int rank, size_t localSize,
                 Tracer& tracer)
      : compute_(compute),
        elem_(compute == DType::kF32 ? 4 : 2),
        swap_(offload.nvmePath, rank, localSize * elem_, offload.pinMemory,
              asyncFileOptions(offload.aio)),
        tracer_(tracer) {}

  void write(size_t offset, size_t count, const float* values) override {
    if (elem_ == 4) {
      swap_.write(offset * 4, count * 4, values);
      return;
    }
    // converted in pieces: no transient copy of the whole range (count can be localSize)
    constexpr size_t kPiece = size_t(1) << 19;
    std::vector<uint16_t> piece(std::min(count, kPiece));
    for (size_t done = 0; done < count; done += kPiece) {
      const size_t size = std::min(kPiece, count - done);
      convertTo16(values + done, {compute_, piece.data()}, size);
      swap_.write((offset + done) * 2, size * 2, piece.data());
    }
  }

  void writeChunk(size_t offset, size_t chunk, const float* values, size_t real) override {
    std::vector<float> padded(chunk, 0.f);
    std::memcpy(padded.data(), values, real * sizeof(float));
    write(offset, chunk, padded.data());
  }

  // The read-ahead's bytes when one was submitted for param, else a read now.
  const void* gatherInput(size_t param, size_t offset, size_t count, void* rankBlock) override {
    if (swap_.pending(param)) {
      tracer_.note(TraceEvent::Kind::kSwapReadWaited, int64_t(param),
                   tracer_.enabled() && swap_.aheadCompleted(param));
      if (swap_.take(param, offset * elem_, count * elem_, rankBlock)) return rankBlock;
    }
    swap_.read(offset * elem_, count * elem_, rankBlock);
    return rankBlock;
  }

  bool readsAhead() const override { return true; }
  bool readPending(size_t param) const override { return swap_.pending(param); }
  bool readCompleted(size_t param) override { return swap_.aheadCompleted(param); }
  void readAhead(size_t param, size_t offset, size_t count) override {
    swap_.readAhead(param, offset * elem_, count * elem_);
    tracer_.note(TraceEvent::Kind::kSwapReadIssued, int64_t(param));
  }

  float* masterAlias() override { return nullptr; }

  ModelParamSink sink(bool /*masterOwned*/) override {
    ModelParamSink out;  // the updated params go to the swap file tile by tile
    out.afterTile = [this](size_t offset, size_t count, const float* master) {
      write(offset, count, master);
    };
    return out;
  }

  void addMemory(MemoryReport& report, MemPlace place) const override {
    addBytes(report, MemKind::kParams, place, swap_.bytes());
    addBytes(report, MemKind::kBuffers, MemPlace::kHost, swap_.bufferBytes());
  }

 private:
  DType compute_;
  size_t elem_;
  ParamSwap swap_;
  Tracer& tracer_;
};

}  // namespace

std::unique_ptr<ParamStore> makeParamStore(const ZeroOptions& options, int rank, size_t localSize,
                                           Tracer& tracer) {
  if (options.offloadParam.device == "nvme")
    return std::make_unique<NvmeParamStore>(options.offloadParam, options.compute, rank, localSize,
                                            tracer);
  return std::make_unique<MemoryParamStore>(options.compute, localSize);
}

}  // namespace ds::zero
