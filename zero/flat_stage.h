// FlatStage: what stages 0-2 share: the full flat model params (fp32 or 16-bit, padded to the
// FlatLayout) and the reduction frontier, which walks down the flat space as blocks finish
// backward and hands full buckets [begin, end) to emitBucket(). Not a stage by itself.
// Invariant: buckets go out from the top of the padded space down, each range once per
// reduction; [low_, high_) is complete and not yet emitted.
#pragma once

#include <cstdint>
#include <vector>

#include "zero/partition.h"
#include "zero/stage.h"

namespace ds::zero {

class FlatStage : public Stage {
 public:
  float* masterAlias() override;
  void setParams(const TrainingEngine::ParamSource& source) override;

  void beforeForward(int /*block*/) override {}
  void afterForward(int /*block*/) override {}
  void beforeBackward(int block) override { allocGrads(block); }
  void afterBackward(int block) override;
  void beginMicroStep(bool lastMicroStep) override;
  void finishReduction() override;
  void zeroGrads() override;

  ModelParamSink modelSink(bool masterOwned) override;
  void writeModelRange(const LocalRange& range, const float* values) override;
  void addMemory(MemoryReport& report) const override;
  void addPipeline(PipelineState& /*state*/) override {}
  bool gatherIssued(size_t /*param*/) const override { return false; }

 protected:
  // reduceEveryMicroStep: stage 2 reduces as blocks finish in every micro-step; stages 0 and 1
  // only in the last one. partStart: flat offset of local index 0.
  FlatStage(const StageContext& ctx, bool reduceEveryMicroStep, size_t partStart);

  virtual void emitBucket(size_t begin, size_t end) = 0;
  virtual void allocGrads(int /*block*/) {}
  virtual void clearGrads() = 0;

  // The model parameters as bytes (element size elemBytes()), and their dtype on the wire.
  char* paramBytes();
  size_t elemBytes() const { return half_ ? 2 : 4; }
  DType paramDtype() const { return half_ ? ctx_.options.compute : DType::kF32; }
  size_t paramBufferBytes() const;

  StageContext ctx_;
  FlatLayout layout_;
  bool half_;
  size_t partStart_;
  size_t bucket_;  // elements per reduce bucket (stage 2: effectiveReduceBucket)

 private:
  bool reduceNow() const { return reduceEveryMicroStep_ || lastMicro_; }
  void resetFrontier();
  void lowerFrontier();
  void advanceFrontier(bool final);

  std::vector<float> params32_;     // [padded] fp32 compute
  std::vector<uint16_t> params16_;  // [padded] 16-bit compute
  bool reduceEveryMicroStep_;
  bool lastMicro_ = true;
  std::vector<char> complete_;  // per param: gradient complete in this micro-step
  size_t low_ = 0, high_ = 0;
};

}  // namespace ds::zero
