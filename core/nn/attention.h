// CausalSelfAttention: the GPT-2 attention block — one qkv projection [C -> 3C], causal
// multi-head attention, and an output projection [C -> C]. Input and output are [B, T, C].
#pragma once
#include "core/nn/linear.h"

namespace zero3 {

class CausalSelfAttention : public Layer {
 public:
  // `proj_init_std` is separate because GPT-2 scales residual projections by 1/sqrt(2 * layers).
  CausalSelfAttention(int64_t width, int64_t heads, float init_std, float proj_init_std);

  int64_t heads() const { return heads_; }
  Linear& qkv() const { return qkv_; }
  Linear& proj() const { return proj_; }
  Var forward(Context& ctx, const Var& x) override;

 private:
  int64_t heads_;
  Linear& qkv_;
  Linear& proj_;
};

}  // namespace zero3
