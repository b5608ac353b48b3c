// The matrix-product ops: matmul (batched or with a shared right operand) and linear.
#include "core/autograd/ops.h"

#include <algorithm>
#include <string>
#include <vector>

#include "core/base/errors.h"
#include "core/autograd/ops_internal.h"

namespace zero3 {
namespace {

// How matmul flattens its operands into the kernel's batched GEMM.
struct MatmulPlan {
  int64_t batch = 1, m = 0, k = 0, n = 0;
  bool b_shared = true;
  Shape out_shape;
};

MatmulPlan plan_matmul(const Shape& a, const Shape& b) {
  const auto fail = [&](const std::string& why) {
    throw ShapeError("matmul: cannot multiply " + shape_str(a) + " by " + shape_str(b) + " (" + why + ")");
  };
  if (a.size() < 2) fail("a needs at least 2 dims");
  const bool shared = b.size() == 2;
  if (!shared && (b.size() != a.size() || !std::equal(a.begin(), a.end() - 2, b.begin()))) {
    fail("b must be [k, n] or have a's leading dims");
  }
  MatmulPlan plan;
  plan.m = a[a.size() - 2];
  plan.k = a.back();
  plan.n = b.back();
  plan.b_shared = shared;
  const int64_t b_rows = b[b.size() - 2];
  if (b_rows != plan.k) fail("inner dims " + std::to_string(plan.k) + " vs " + std::to_string(b_rows));
  for (size_t d = 0; d + 2 < a.size(); ++d) plan.batch *= a[d];
  plan.out_shape = a;
  plan.out_shape.back() = plan.n;
  return plan;
}

// out [rows, out_features] gets `bias` in every row: one segment copy per row (what a GEMM of
// ones[rows, 1] by bias[1, out_features] computes, exactly, without the GEMM).
void fill_rows_with_bias(Context& ctx, const Tensor& bias, int64_t rows, Tensor& out) {
  const int64_t width = bias.numel();
  std::vector<CopySegment> rows_of_bias(static_cast<size_t>(rows));
  for (int64_t row = 0; row < rows; ++row) rows_of_bias[row] = {.from = 0, .to = row * width, .count = width};
  ctx.kernels().copy_segments(bias, out, rows_of_bias);
}

void check_linear_shapes(const Shape& xs, const Shape& ws, const Var& bias) {
  const bool has_bias = bias.defined();
  const Shape bs = has_bias ? bias.shape() : Shape{};
  if (xs.empty() || ws.size() != 2 || ws[1] != xs.back() || (has_bias && bs != Shape{ws[0]})) {
    throw ShapeError("linear: x " + shape_str(xs) + ", weight " + shape_str(ws) +
                     (has_bias ? ", bias " + shape_str(bs) : std::string(", no bias")) +
                     " (want x [..., in], weight [out, in], bias [out])");
  }
}

}  // namespace

Var matmul(Context& ctx, const Var& a, const Var& b) {
  require_defined("matmul", a, "a");
  require_defined("matmul", b, "b");
  const MatmulPlan p = plan_matmul(a.shape(), b.shape());
  Tensor out = make_output(ctx, p.out_shape, promote(a.value().dtype(), b.value().dtype()),
                           a.value().is_meta() || b.value().is_meta());
  if (!out.is_meta()) {
    ctx.kernels().matmul(a.value(), false, b.value(), false, out, p.batch, p.m, p.n, p.k, p.b_shared, 0.0f);
  }
  return record(ctx, "matmul", [a, b](Context& c) { matmul(c, a, b); }, {a, b}, out, [a, b, p](Context& c, const Tensor& grad) {
    if (a.requires_grad()) {
      Tensor grad_a = device_uninitialized(c.kernels(), a.shape(), a.value().dtype());
      c.kernels().matmul(grad, false, b.value(), true, grad_a, p.batch, p.m, p.k, p.n, p.b_shared, 0.0f);
      add_grad(c, a, grad_a);
    }
    if (b.requires_grad()) {
      Tensor grad_b = device_uninitialized(c.kernels(), b.shape(), b.value().dtype());
      // A shared b collects the gradient of every batch: one GEMM over the flattened batch.
      if (p.b_shared) c.kernels().matmul(a.value(), true, grad, false, grad_b, 1, p.k, p.n, p.batch * p.m, true, 0.0f);
      else c.kernels().matmul(a.value(), true, grad, false, grad_b, p.batch, p.k, p.n, p.m, false, 0.0f);
      add_grad(c, b, grad_b);
    }
  });
}

Var linear(Context& ctx, const Var& x, const Var& weight, const Var& bias) {
  require_defined("linear", x, "x");
  require_defined("linear", weight, "weight");
  const bool has_bias = bias.defined();
  const Shape& xs = x.shape();
  const Shape& ws = weight.shape();
  check_linear_shapes(xs, ws, bias);
  const int64_t in_features = ws[1], out_features = ws[0];
  const int64_t rows = shape_numel(Shape(xs.begin(), xs.end() - 1));
  Shape out_shape = xs;
  out_shape.back() = out_features;
  DType dtype = promote(x.value().dtype(), weight.value().dtype());
  if (has_bias) dtype = promote(dtype, bias.value().dtype());
  const bool meta = x.value().is_meta() || weight.value().is_meta() || (has_bias && bias.value().is_meta());
  Tensor out = make_output(ctx, out_shape, dtype, meta);
  if (!meta) {
    if (has_bias) {
      // Bias rows first (ones[rows,1] @ bias[1,out]), then accumulate x @ W^T with beta = 1, so a
      // bf16 output is rounded once, like a fused GEMM epilogue.
      fill_rows_with_bias(ctx, bias.value(), rows, out);
    }
    ctx.kernels().matmul(x.value(), false, weight.value(), true, out, 1, rows, out_features, in_features, true,
                         has_bias ? 1.0f : 0.0f);
  }
  std::vector<Var> inputs = {x, weight};
  if (has_bias) inputs.push_back(bias);
  auto linear_backward = [x, weight, bias, rows, in_features, out_features](Context& c, const Tensor& grad) {
    if (x.requires_grad()) {
      Tensor grad_x = device_uninitialized(c.kernels(), x.shape(), x.value().dtype());
      c.kernels().matmul(grad, false, weight.value(), false, grad_x, 1, rows, in_features, out_features, true, 0.0f);
      add_grad(c, x, grad_x);
    }
    if (weight.requires_grad()) {
      Tensor grad_w = device_uninitialized(c.kernels(), weight.shape(), weight.value().dtype());
      c.kernels().matmul(grad, true, x.value(), false, grad_w, 1, out_features, in_features, rows, true, 0.0f);
      add_grad(c, weight, grad_w);
    }
    if (bias.requires_grad()) add_grad(c, bias, reduce_to(c, grad, bias.value()));
  };
  return record(ctx, "linear", [x, weight, bias](Context& c) { linear(c, x, weight, bias); }, inputs, out,
                linear_backward);
}

}  // namespace zero3
