// Linear layer.
#include "core/nn/linear.h"

namespace zero3 {

Linear::Linear(int64_t in_features, int64_t out_features, bool has_bias, float init_std)
    : Layer("linear"), in_features_(in_features), out_features_(out_features),
      weight_(add_parameter("weight", {out_features, in_features}, Init::normal, init_std)) {
  if (has_bias) bias_ = &add_parameter("bias", {out_features}, Init::zeros);
}

Var Linear::forward(Context& ctx, const Var& x) {
  return ctx.invoke(*this, [&] {
    const Var bias = bias_ ? ctx.param(*this, *bias_) : Var();
    return linear(ctx, x, ctx.param(*this, weight_), bias);
  });
}

}  // namespace zero3
