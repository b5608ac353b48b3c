// Linear layer over an external (tied) weight.
#include "core/nn/tied_linear.h"

#include "core/base/errors.h"

namespace zero3 {

TiedLinear::TiedLinear(Parameter& weight, bool transposed, bool has_bias)
    : Layer("tied_linear"), weight_(weight), transposed_(transposed) {
  ZERO3_CHECK(weight.shape().size() == 2, "tied weight '" + weight.name() + "' is " + shape_str(weight.shape()));
  if (has_bias) bias_ = &add_parameter("bias", {out_features()}, Init::zeros);
}

int64_t TiedLinear::in_features() const { return weight_.shape()[transposed_ ? 0 : 1]; }
int64_t TiedLinear::out_features() const { return weight_.shape()[transposed_ ? 1 : 0]; }

Var TiedLinear::forward(Context& ctx, const Var& x) {
  return ctx.invoke(*this, [&] {
    // The user module is this one, not the weight's owner: that is what marks the use as external.
    Var weight = ctx.param(*this, weight_);
    if (transposed_) weight = transpose(ctx, weight, 0, 1);
    const Var bias = bias_ ? ctx.param(*this, *bias_) : Var();
    return linear(ctx, x, weight, bias);
  });
}

}  // namespace zero3
