// KvCache: the keys and values of every layer for a fixed number of sequence slots, so a decode
// step computes one token's forward and attends over the stored prefix instead of recomputing it.
// Layout per (layer, slot): [maxT, C] rows, head h at columns h*hs (as qkv's k and v parts).
// fp32 in both weight dtypes. Not thread-safe; one Decoder owns one cache.
#pragma once

#include <cstddef>
#include <vector>

namespace ds::runtime {

class KvCache {
 public:
  KvCache(int nLayer, int slots, int maxT, int C);
  float* keys(int layer, int slot) { return k_.data() + index(layer, slot); }
  float* values(int layer, int slot) { return v_.data() + index(layer, slot); }
  int length(int slot) const { return len_[static_cast<size_t>(slot)]; }
  void setLength(int slot, int n) { len_[static_cast<size_t>(slot)] = n; }
  int slots() const { return slots_; }
  int maxT() const { return maxT_; }
  size_t bytes() const { return (k_.size() + v_.size()) * sizeof(float); }

 private:
  size_t index(int layer, int slot) const {
    return (static_cast<size_t>(layer) * static_cast<size_t>(slots_) + static_cast<size_t>(slot)) *
           static_cast<size_t>(maxT_) * static_cast<size_t>(C_);
  }
  int slots_, maxT_, C_;
  std::vector<float> k_, v_;
  std::vector<int> len_;
};

}  // namespace ds::runtime
