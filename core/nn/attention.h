// CausalSelfAttention: the GPT-2 attention block — one qkv projection [C -> 3C], causal
// multi-head attention, and an output projection [C -> C].
//
// GPT's blocks hand it [B, T, C]. A sequential token model (core/models/MODEL_SPEC.md,
// `causal_self_attention`) hands it token rows [B*T, C] and says T at construction: the layer
// views the rows as B sequences of T tokens, so every other layer keeps its 2-D meaning.
#pragma once
#include "core/nn/linear.h"

namespace zero3 {

struct AttentionOptions {
  bool qkv_bias = true;
  bool proj_bias = true;
  // 0: the input is [B, T, C]; T > 0: the input is token rows [B*T, C], B whole sequences.
  int64_t rows_per_sequence = 0;
};

class CausalSelfAttention : public Layer {
 public:
  // `proj_init_std` is separate because GPT-2 scales residual projections by 1/sqrt(2 * layers).
  CausalSelfAttention(int64_t width, int64_t heads, float init_std, float proj_init_std,
                      const AttentionOptions& options = {});

  int64_t heads() const { return heads_; }
  Linear& qkv() const { return qkv_; }
  Linear& proj() const { return proj_; }
  Var forward(Context& ctx, const Var& x) override;

 private:
  int64_t heads_;
  int64_t rows_per_sequence_;
  Linear& qkv_;
  Linear& proj_;
};

}  // namespace zero3
