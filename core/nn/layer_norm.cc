// LayerNorm layer.
#include "core/nn/layer_norm.h"

#include "core/base/math_bugs.h"

namespace zero3 {

LayerNorm::LayerNorm(int64_t width, float eps)
    : Layer("layer_norm"), eps_(eps), weight_(add_parameter("weight", {width}, Init::ones)),
      bias_(add_parameter("bias", {width}, Init::zeros)) {}

Var LayerNorm::forward(Context& ctx, const Var& x) {
  // Math bug layer_norm_eps_1e3 (core/base/math_bugs.h) replaces the eps here, where the layer
  // hands it to the op; the backward reuses the forward's rstd, so it follows.
  const float eps = math_bug_on(MathBug::layer_norm_eps_1e3) ? 1e-3f : eps_;
  return ctx.invoke(*this, [&] {
    return layer_norm(ctx, x, ctx.param(*this, weight_), ctx.param(*this, bias_), eps);
  });
}

}  // namespace zero3
