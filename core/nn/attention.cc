// Causal self-attention block.
#include "core/nn/attention.h"

#include "core/base/errors.h"

namespace zero3 {

CausalSelfAttention::CausalSelfAttention(int64_t width, int64_t heads, float init_std, float proj_init_std)
    : Layer("causal_self_attention"), heads_(heads),
      qkv_(add_child("qkv", std::make_unique<Linear>(width, 3 * width, /*has_bias=*/true, init_std))),
      proj_(add_child("proj", std::make_unique<Linear>(width, width, /*has_bias=*/true, proj_init_std))) {
  ZERO3_CHECK(heads > 0 && width % heads == 0,
              "width " + std::to_string(width) + " is not a multiple of heads " + std::to_string(heads));
}

Var CausalSelfAttention::forward(Context& ctx, const Var& x) {
  return ctx.invoke(*this, [&] {
    const Var attended = causal_self_attention(ctx, qkv_.forward(ctx, x), heads_);
    return proj_.forward(ctx, attended);
  });
}

}  // namespace zero3
