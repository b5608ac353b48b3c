// SwiGLU feed-forward block.
#include "core/nn/swiglu.h"

namespace zero3 {

SwiGlu::SwiGlu(int64_t width, int64_t hidden, bool has_bias, float init_std, float down_init_std)
    : Layer("swiglu"), gate_(add_child("gate", std::make_unique<Linear>(width, hidden, has_bias, init_std))),
      up_(add_child("up", std::make_unique<Linear>(width, hidden, has_bias, init_std))),
      down_(add_child("down", std::make_unique<Linear>(hidden, width, has_bias, down_init_std))) {}

Var SwiGlu::forward(Context& ctx, const Var& x) {
  return ctx.invoke(*this, [&] {
    const Var gated = mul(ctx, silu(ctx, gate_.forward(ctx, x)), up_.forward(ctx, x));
    return down_.forward(ctx, gated);
  });
}

}  // namespace zero3
