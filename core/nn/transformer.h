// TransformerBlock: the pre-norm GPT-2 block, x + attn(ln_1(x)) then x + mlp(ln_2(x)).
#pragma once
#include "core/nn/attention.h"
#include "core/nn/layer_norm.h"
#include "core/nn/mlp.h"

namespace zero3 {

class TransformerBlock : public Layer {
 public:
  TransformerBlock(int64_t width, int64_t heads, float init_std, float proj_init_std);

  CausalSelfAttention& attn() const { return attn_; }
  Mlp& mlp() const { return mlp_; }
  Var forward(Context& ctx, const Var& x) override;

 private:
  LayerNorm& ln_1_;
  CausalSelfAttention& attn_;
  LayerNorm& ln_2_;
  Mlp& mlp_;
};

}  // namespace zero3
