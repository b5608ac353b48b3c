// RMSNorm layer.
#include "core/nn/rms_norm.h"

#include "core/base/math_bugs.h"

namespace zero3 {

RmsNorm::RmsNorm(int64_t width, float eps)
    : Layer("rms_norm"), eps_(eps), weight_(add_parameter("weight", {width}, Init::ones)) {}

Var RmsNorm::forward(Context& ctx, const Var& x) {
  // Math bug rms_norm_eps_1e3 (core/base/math_bugs.h) replaces the eps where the layer hands it to
  // the op; the backward reuses the forward's rstd, so it follows.
  const float eps = math_bug_on(MathBug::rms_norm_eps_1e3) ? 1e-3f : eps_;
  return ctx.invoke(*this, [&] { return rms_norm(ctx, x, ctx.param(*this, weight_), eps); });
}

}  // namespace zero3
