// Broadcasting parameter layers: checked and raw uses.
#include "core/nn/broadcast_layers.h"

#include "core/base/errors.h"

namespace zero3 {

namespace {

enum class Elementwise : uint8_t { add, mul };

// x [N, width] OP p, viewing x as [N, width, 1] when `declared` (the parameter's registered
// shape) has two dims. The view follows the declared shape, not the value's: user code is
// written for the real parameter, and a placeholder value must meet it exactly as it would.
Var apply(Context& ctx, Elementwise op, const Var& x, const Var& p, const Shape& declared) {
  const int64_t rows = x.shape()[0];
  const Var lhs = declared.size() == 2 ? reshape(ctx, x, {rows, x.shape()[1], 1}) : x;
  const Var out = op == Elementwise::add ? add(ctx, lhs, p) : mul(ctx, lhs, p);
  if (declared.size() != 2) return out;
  return reshape(ctx, out, {rows, out.shape()[1] * out.shape()[2]});
}

}  // namespace

std::optional<int64_t> broadcast_layer_width(int64_t width, const Shape& shape) {
  if (shape.empty() || shape.size() > 2 || (shape.size() == 2 && shape[1] != 1)) return std::nullopt;
  const int64_t n = shape[0];
  if (n == width || width == 1) return n;
  if (n == 1) return width;
  return std::nullopt;
}

Scale::Scale(const Shape& shape) : Layer("scale"), scale_(add_parameter("scale", shape, Init::ones)) {}

Var Scale::forward(Context& ctx, const Var& x) {
  return ctx.invoke(*this, [&] { return apply(ctx, Elementwise::mul, x, ctx.param(*this, scale_), scale_.shape()); });
}

Bias::Bias(const Shape& shape) : Layer("bias"), bias_(add_parameter("bias", shape, Init::zeros)) {}

Var Bias::forward(Context& ctx, const Var& x) {
  return ctx.invoke(*this, [&] { return apply(ctx, Elementwise::add, x, ctx.param(*this, bias_), bias_.shape()); });
}

RawScale::RawScale(const Shape& own_shape) : Layer("raw_scale"), target_(add_parameter("scale", own_shape, Init::ones)) {}

RawScale::RawScale(Parameter& other) : Layer("raw_scale"), target_(other) {}

Var RawScale::forward(Context& ctx, const Var& x) {
  return ctx.invoke(*this, [&] {
    return apply(ctx, Elementwise::mul, x, constant(ctx.raw(target_)), target_.shape());
  });
}

}  // namespace zero3
