// Feed-forward block.
#include "core/nn/mlp.h"

namespace zero3 {

Mlp::Mlp(int64_t width, int64_t hidden, float init_std, float proj_init_std)
    : Layer("mlp"), fc_(add_child("fc", std::make_unique<Linear>(width, hidden, /*has_bias=*/true, init_std))),
      act_(add_child("gelu", std::make_unique<Activation>(ActivationKind::gelu))),
      proj_(add_child("proj", std::make_unique<Linear>(hidden, width, /*has_bias=*/true, proj_init_std))) {}

Var Mlp::forward(Context& ctx, const Var& x) {
  return ctx.invoke(*this, [&] { return proj_.forward(ctx, act_.forward(ctx, fc_.forward(ctx, x))); });
}

}  // namespace zero3
