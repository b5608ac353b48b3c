// LayerNorm layer.
#include "core/nn/layer_norm.h"

namespace zero3 {

LayerNorm::LayerNorm(int64_t width, float eps)
    : Layer("layer_norm"), eps_(eps), weight_(add_parameter("weight", {width}, Init::ones)),
      bias_(add_parameter("bias", {width}, Init::zeros)) {}

Var LayerNorm::forward(Context& ctx, const Var& x) {
  return ctx.invoke(*this, [&] {
    return layer_norm(ctx, x, ctx.param(*this, weight_), ctx.param(*this, bias_), eps_);
  });
}

}  // namespace zero3
