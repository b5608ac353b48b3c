// The transformer-block ops: layer_norm, rms_norm, embedding, causal_softmax and causal_self_attention.
#include "core/autograd/ops.h"

#include <cmath>
#include <string>

#include "core/base/errors.h"
#include "core/base/math_bugs.h"
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
  return record(ctx, "layer_norm", [x, gamma, beta, eps](Context& c) { layer_norm(c, x, gamma, beta, eps); }, {x, gamma, beta}, out, [x, gamma, beta, mean, rstd](Context& c, const Tensor& grad) {
    Tensor grad_x = device_uninitialized(c.kernels(), x.shape(), x.value().dtype());
    Tensor grad_gamma = device_uninitialized(c.kernels(), gamma.shape(), gamma.value().dtype());
    Tensor grad_beta = device_uninitialized(c.kernels(), beta.shape(), beta.value().dtype());
    c.kernels().layer_norm_backward(x.value(), gamma.value(), mean, rstd, grad, grad_x, grad_gamma, grad_beta);
    add_grad(c, x, grad_x);
    add_grad(c, gamma, grad_gamma);
    add_grad(c, beta, grad_beta);
  });
}

Var rms_norm(Context& ctx, const Var& x, const Var& gamma, float eps) {
  require_defined("rms_norm", x, "x");
  require_defined("rms_norm", gamma, "gamma");
  const Shape& xs = x.shape();
  if (xs.empty() || gamma.shape() != Shape{xs.back()}) {
    throw ShapeError("rms_norm: x " + shape_str(xs) + ", gamma " + shape_str(gamma.shape()) +
                     " (want gamma of shape [last dim of x])");
  }
  const int64_t rows = shape_numel(Shape(xs.begin(), xs.end() - 1));
  const DType dtype = promote(x.value().dtype(), gamma.value().dtype());
  const bool meta = x.value().is_meta() || gamma.value().is_meta();
  Tensor out = make_output(ctx, xs, dtype, meta);
  Tensor rstd = make_output(ctx, {rows}, DType::f32, meta);
  if (!meta) ctx.kernels().rms_norm_forward(x.value(), gamma.value(), eps, out, rstd);
  return record(ctx, "rms_norm", [x, gamma, eps](Context& c) { rms_norm(c, x, gamma, eps); }, {x, gamma}, out, [x, gamma, rstd](Context& c, const Tensor& grad) {
    Tensor grad_x = device_uninitialized(c.kernels(), x.shape(), x.value().dtype());
    Tensor grad_gamma = device_uninitialized(c.kernels(), gamma.shape(), gamma.value().dtype());
    c.kernels().rms_norm_backward(x.value(), gamma.value(), rstd, grad, grad_x, grad_gamma);
    add_grad(c, x, grad_x);
    add_grad(c, gamma, grad_gamma);
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
  return record(ctx, "embedding", [table, ids](Context& c) { embedding(c, table, ids); }, {table}, out, [table, ids = resident_ids](Context& c, const Tensor& grad) {
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
  return record(ctx, "causal_softmax", [scores](Context& c) { causal_softmax(c, scores); }, {scores}, out, [scores, out](Context& c, const Tensor& grad) {
    Tensor grad_scores = device_uninitialized(c.kernels(), scores.shape(), scores.value().dtype());
    c.kernels().causal_softmax_backward(out, grad, grad_scores);
    add_grad(c, scores, grad_scores);
  });
}

namespace {

// qkv [B, T, 3C] read as [B, T, 3, heads, hd], permuted to [3, B, heads, T, hd] by one copy, and back.
const std::vector<int64_t> kSplitHeads = {2, 0, 3, 1, 4};
const std::vector<int64_t> kMergeHeads = {1, 3, 0, 2, 4};
// heads_out [B, heads, T, hd] to [B, T, heads, hd], and back: a swap of dims 1 and 2, its own inverse.
const std::vector<int64_t> kSwapHeadsAndSteps = {0, 2, 1, 3};

}  // namespace

// One recorded op with its own backward, instead of slices, transposes and matmuls: q, k and v are
// views of one permuted copy of qkv, k is read transposed by the GEMM rather than copied, and
// backward writes dq, dk and dv straight into the views of one gradient that a single permute
// turns into qkv's: three slices, seven transposes and a zero-filled gradient fewer per layer, and
// only q, k, v and the probabilities kept for backward. Same arithmetic, op for op, as the
// composition (scores = q k^T, scaled, causal softmax, times v).
Var causal_self_attention(Context& ctx, const Var& qkv, int64_t heads) {
  require_defined("causal_self_attention", qkv, "qkv");
  const Shape& s = qkv.shape();
  if (s.size() != 3 || s[2] % 3 != 0 || heads <= 0 || (s[2] / 3) % heads != 0) {
    throw ShapeError("causal_self_attention: qkv " + shape_str(s) + " with " + std::to_string(heads) +
                     " heads (want [B, T, 3C] with C divisible by heads)");
  }
  const int64_t batch = s[0], steps = s[1], channels = s[2] / 3, head_dim = channels / heads;
  const int64_t matrices = batch * heads, per_part = matrices * steps * head_dim;
  const Shape part_shape = {batch, heads, steps, head_dim};
  const Shape scores_shape = {batch, heads, steps, steps};
  // A zero head width makes every score 0; any finite factor then keeps them 0 instead of 0 * inf.
  const float factor = head_dim > 0 ? 1.0f / std::sqrt(static_cast<float>(head_dim)) : 1.0f;
  const DType dtype = qkv.value().dtype();
  const bool meta = qkv.value().is_meta();
  Tensor out = make_output(ctx, {batch, steps, channels}, dtype, meta);
  Tensor split = make_output(ctx, {3, batch, heads, steps, head_dim}, dtype, meta);
  Tensor probabilities = make_output(ctx, scores_shape, dtype, meta);
  if (!meta) {
    Kernels& k = ctx.kernels();
    k.permute(qkv.value().reshape({batch, steps, 3, heads, head_dim}), kSplitHeads, split);
    const Tensor q = split.view_range(0, part_shape), keys = split.view_range(per_part, part_shape);
    const Tensor v = split.view_range(2 * per_part, part_shape);
    Tensor scores = device_uninitialized(k, scores_shape, dtype);
    k.matmul(q, false, keys, true, scores, matrices, steps, steps, head_dim, false, 0.0f);
    Tensor scaled = device_uninitialized(k, scores_shape, dtype);
    k.scale(scores, factor, scaled);
    k.causal_softmax_forward(scaled, probabilities);
    Tensor heads_out = device_uninitialized(k, part_shape, dtype);
    k.matmul(probabilities, false, v, false, heads_out, matrices, steps, head_dim, steps, false, 0.0f);
    Tensor out_by_head = out.reshape({batch, steps, heads, head_dim});
    k.permute(heads_out, kSwapHeadsAndSteps, out_by_head);
  }
  return record(ctx, "causal_self_attention", [qkv, heads](Context& c) { causal_self_attention(c, qkv, heads); }, {qkv}, out,
                [=](Context& c, const Tensor& grad) {
                  Kernels& k = c.kernels();
                  const Tensor q = split.view_range(0, part_shape), keys = split.view_range(per_part, part_shape);
                  const bool value_at_key = math_bug_on(MathBug::attention_backward_value_at_key);
                  const Tensor v = split.view_range(value_at_key ? per_part : 2 * per_part, part_shape);
                  Tensor grad_heads_out = device_uninitialized(k, part_shape, dtype);
                  k.permute(grad.reshape({batch, steps, heads, head_dim}), kSwapHeadsAndSteps, grad_heads_out);
                  Tensor grad_split = device_uninitialized(k, split.shape(), dtype);
                  Tensor grad_q = grad_split.view_range(0, part_shape);
                  Tensor grad_k = grad_split.view_range(per_part, part_shape);
                  Tensor grad_v = grad_split.view_range(2 * per_part, part_shape);
                  // d probabilities = d out v^T; dv = probabilities^T d out.
                  Tensor grad_probabilities = device_uninitialized(k, scores_shape, dtype);
                  k.matmul(grad_heads_out, false, v, true, grad_probabilities, matrices, steps, steps, head_dim,
                           false, 0.0f);
                  k.matmul(probabilities, true, grad_heads_out, false, grad_v, matrices, steps, head_dim, steps,
                           false, 0.0f);
                  Tensor grad_scaled = device_uninitialized(k, scores_shape, dtype);
                  k.causal_softmax_backward(probabilities, grad_probabilities, grad_scaled);
                  Tensor grad_scores = device_uninitialized(k, scores_shape, dtype);
                  k.scale(grad_scaled, factor, grad_scores);
                  // dq = d scores k; dk = d scores^T q.
                  k.matmul(grad_scores, false, keys, false, grad_q, matrices, steps, head_dim, steps, false, 0.0f);
                  k.matmul(grad_scores, true, q, false, grad_k, matrices, steps, head_dim, steps, false, 0.0f);
                  Tensor grad_qkv = device_uninitialized(k, {batch, steps, 3, heads, head_dim}, dtype);
                  k.permute(grad_split, kMergeHeads, grad_qkv);
                  add_grad(c, qkv, grad_qkv.reshape(qkv.shape()));
                },
                /*saved_bytes=*/split.bytes() + probabilities.bytes());
}

}  // namespace zero3
