// The transformer-block ops: layer_norm, embedding, causal_softmax and causal_self_attention.
#include "core/autograd/ops.h"

#include <cmath>
#include <string>

#include "core/base/errors.h"
#include "core/autograd/ops_internal.h"

namespace zero3 {

Var layer_norm(Context& ctx, const Var& x, const Var& gamma, const Var& beta, float eps) {
  require_defined("layer_norm", x, "x");
  require_defined("layer_norm", gamma, "gamma");
  require_defined("layer_norm", beta, "beta");
  const Shape& xs = x.shape();
  if (xs.empty() || gamma.shape() != Shape{xs.back()} || beta.shape() != Shape{xs.back()}) {
    throw ShapeError("layer_norm: x " + shape_str(xs) + ", gamma " + shape_str(gamma.shape()) + ", beta " +
                     shape_str(beta.shape()) + " (want gamma and beta of shape [last dim of x])");
  }
  const int64_t rows = shape_numel(Shape(xs.begin(), xs.end() - 1));
  const DType dtype = promote(promote(x.value().dtype(), gamma.value().dtype()), beta.value().dtype());
  const bool meta = x.value().is_meta() || gamma.value().is_meta() || beta.value().is_meta();
  Tensor out = make_output(ctx, xs, dtype, meta);
  Tensor mean = make_output(ctx, {rows}, DType::f32, meta);
  Tensor rstd = make_output(ctx, {rows}, DType::f32, meta);
  if (!meta) ctx.kernels().layer_norm_forward(x.value(), gamma.value(), beta.value(), eps, out, mean, rstd);
  return record(ctx, "layer_norm", {x, gamma, beta}, out, [x, gamma, beta, mean, rstd](Context& c, const Tensor& grad) {
    Tensor grad_x = device_uninitialized(c.kernels(), x.shape(), x.value().dtype());
    Tensor grad_gamma = device_uninitialized(c.kernels(), gamma.shape(), gamma.value().dtype());
    Tensor grad_beta = device_uninitialized(c.kernels(), beta.shape(), beta.value().dtype());
    c.kernels().layer_norm_backward(x.value(), gamma.value(), mean, rstd, grad, grad_x, grad_gamma, grad_beta);
    add_grad(c, x, grad_x);
    add_grad(c, gamma, grad_gamma);
    add_grad(c, beta, grad_beta);
  });
}

Var embedding(Context& ctx, const Var& table, const Tensor& ids) {
  require_defined("embedding", table, "table");
  ZERO3_CHECK(ids.defined(), "embedding: ids are undefined");
  if (table.value().rank() != 2) throw ShapeError("embedding: table " + shape_str(table.shape()) + " is not [V, C]");
  check_indices("embedding", "id", ids, table.shape()[0], "table " + shape_str(table.shape()));
  Shape out_shape = ids.shape();
  out_shape.push_back(table.shape()[1]);
  Tensor out = make_output(ctx, out_shape, table.value().dtype(), table.value().is_meta() || ids.is_meta());
  const Tensor resident_ids = ctx.kernels().to_device(ids);
  if (!out.is_meta()) ctx.kernels().embedding_forward(table.value(), resident_ids, out);
  return record(ctx, "embedding", {table}, out, [table, ids = resident_ids](Context& c, const Tensor& grad) {
    Tensor grad_table = device_zeros(c.kernels(), table.shape(), table.value().dtype());
    c.kernels().embedding_backward_into(grad, ids, grad_table);
    add_grad(c, table, grad_table);
  });
}

Var causal_softmax(Context& ctx, const Var& scores) {
  require_defined("causal_softmax", scores, "scores");
  const Shape& ss = scores.shape();
  if (ss.size() < 2 || ss[ss.size() - 1] != ss[ss.size() - 2]) {
    throw ShapeError("causal_softmax: scores " + shape_str(ss) + " are not [..., T, T]");
  }
  Tensor out = make_output(ctx, ss, scores.value().dtype(), scores.value().is_meta());
  if (!out.is_meta()) ctx.kernels().causal_softmax_forward(scores.value(), out);
  // The probabilities are a saved intermediate, not a parameter, so backward may capture them.
  return record(ctx, "causal_softmax", {scores}, out, [scores, out](Context& c, const Tensor& grad) {
    Tensor grad_scores = device_uninitialized(c.kernels(), scores.shape(), scores.value().dtype());
    c.kernels().causal_softmax_backward(out, grad, grad_scores);
    add_grad(c, scores, grad_scores);
  });
}

Var causal_self_attention(Context& ctx, const Var& qkv, int64_t heads) {
  require_defined("causal_self_attention", qkv, "qkv");
  const Shape& s = qkv.shape();
  if (s.size() != 3 || s[2] % 3 != 0 || heads <= 0 || (s[2] / 3) % heads != 0) {
    throw ShapeError("causal_self_attention: qkv " + shape_str(s) + " with " + std::to_string(heads) +
                     " heads (want [B, T, 3C] with C divisible by heads)");
  }
  const int64_t batch = s[0], steps = s[1], channels = s[2] / 3, head_dim = channels / heads;
  // [B, T, C] -> [B, heads, T, head_dim]
  const auto split_heads = [&](int64_t part) {
    const Var part_values = slice(ctx, qkv, 2, part * channels, channels);
    return transpose(ctx, reshape(ctx, part_values, {batch, steps, heads, head_dim}), 1, 2);
  };
  const Var q = split_heads(0), k = split_heads(1), v = split_heads(2);
  // A zero head width makes every score 0; any finite factor then keeps them 0 instead of 0 * inf.
  const float factor = head_dim > 0 ? 1.0f / std::sqrt(static_cast<float>(head_dim)) : 1.0f;
  const Var scores = scale(ctx, matmul(ctx, q, transpose(ctx, k, 2, 3)), factor);
  const Var heads_out = matmul(ctx, causal_softmax(ctx, scores), v);
  return reshape(ctx, transpose(ctx, heads_out, 1, 2), {batch, steps, channels});
}

}  // namespace zero3
