// A layer whose parameters are registered and never used.
#include "core/nn/unused_linear.h"

namespace zero3 {

UnusedLinear::UnusedLinear(int64_t in_features, int64_t out_features, bool has_bias, float init_std)
    : Layer("unused_linear"), weight_(add_parameter("weight", {out_features, in_features}, Init::normal, init_std)) {
  if (has_bias) add_parameter("bias", {out_features}, Init::zeros);
}

Var UnusedLinear::forward(Context& ctx, const Var& x) {
  return ctx.invoke(*this, [&] { return x; });
}

}  // namespace zero3
