// Transformer block.
#include "core/nn/transformer.h"

namespace zero3 {

TransformerBlock::TransformerBlock(int64_t width, int64_t heads, float init_std, float proj_init_std)
    : Layer("transformer_block"), ln_1_(add_child("ln_1", std::make_unique<LayerNorm>(width))),
      attn_(add_child("attn", std::make_unique<CausalSelfAttention>(width, heads, init_std, proj_init_std))),
      ln_2_(add_child("ln_2", std::make_unique<LayerNorm>(width))),
      mlp_(add_child("mlp", std::make_unique<Mlp>(width, 4 * width, init_std, proj_init_std))) {}

Var TransformerBlock::forward(Context& ctx, const Var& x) {
  return ctx.invoke(*this, [&] {
    const Var h = add(ctx, x, attn_.forward(ctx, ln_1_.forward(ctx, x)));
    return add(ctx, h, mlp_.forward(ctx, ln_2_.forward(ctx, h)));
  });
}

}  // namespace zero3
