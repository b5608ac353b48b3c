// Skip connections.
#include "core/nn/residual.h"

namespace zero3 {

namespace {

// Per-row sum of y [N, k] -> [N, 1], as y @ ones[k, 1]: a row never mixes with another row, so
// the loss of a rank's shard does not depend on the other ranks' examples.
Var row_sum(Context& ctx, const Var& y) {
  const int64_t width = y.shape().back();
  return matmul(ctx, y, constant(device_full(ctx.kernels(), {width, 1}, 1.0f)));
}

}  // namespace

const char* skip_kind_name(SkipKind kind) {
  switch (kind) {
    case SkipKind::residual: return "residual";
    case SkipKind::concat: return "concat";
    case SkipKind::sum_residual: return "sum_residual";
  }
  return "unknown";
}

Skip::Skip(SkipKind kind, std::unique_ptr<Sequential> body)
    : Layer(skip_kind_name(kind)), kind_(kind), body_(add_child("layers", std::move(body))) {}

Var Skip::forward(Context& ctx, const Var& x) {
  return ctx.invoke(*this, [&] {
    const Var y = body_.forward(ctx, x);
    if (kind_ == SkipKind::residual) return add(ctx, x, y);
    if (kind_ == SkipKind::concat) return concat(ctx, {x, y}, static_cast<int64_t>(x.shape().size()) - 1);
    return add(ctx, x, row_sum(ctx, y));
  });
}

}  // namespace zero3
