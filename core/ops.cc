// The differentiable ops: shape checks, output allocation (meta in, meta out), the kernel call,
// and the backward closure recorded on the tape. Backward closures read inputs through their Vars
// (autograd.h) and capture only saved intermediates such as layer-norm statistics.
#include "core/ops.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include "core/errors.h"

namespace zero3 {
namespace {

using Backward = std::function<void(Context&, const Tensor& grad_output)>;

// PyTorch promotion for the two float types: bf16 only when every operand is bf16.
DType promote(DType a, DType b) { return a == DType::bf16 && b == DType::bf16 ? DType::bf16 : DType::f32; }

Tensor make_output(const Shape& shape, DType dtype, bool meta) {
  return Tensor::zeros(shape, dtype, meta ? Device::meta : Device::cpu);
}

void require_defined(const char* op, const Var& var, const char* what) {
  ZERO3_CHECK(var.defined() && var.value().defined(), std::string(op) + ": " + what + " is undefined");
}

std::string format_number(double value) {
  std::ostringstream text;
  text << value;
  return text.str();
}

int64_t normalize_dim(const char* op, int64_t dim, int64_t rank, const Shape& shape) {
  if (dim < -rank || dim >= rank) {
    throw ShapeError(std::string(op) + ": dim " + std::to_string(dim) + " out of range for " + shape_str(shape));
  }
  return dim < 0 ? dim + rank : dim;
}

void add_grad(Context& ctx, Var var, const Tensor& gradient) { var.accumulate_grad(ctx, gradient); }

// Backward reads inputs through their Vars. An engine that released a parameter after forward and
// did not fetch it again leaves a placeholder there, and computing with it would be garbage.
void check_inputs_unchanged(const char* op, const std::vector<Var>& inputs, const std::vector<Shape>& shapes) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& value = inputs[i].value();
    if (!value.defined() || value.is_meta() || value.shape() != shapes[i]) {
      throw CorrectnessError(std::string(op) + " backward: input " + std::to_string(i) + " is " + describe(value) +
                             " but forward used " + shape_str(shapes[i]) +
                             " (a parameter released and not fetched again before backward?)");
    }
  }
}

// Wraps `value` as the op's output and records `backward` when any input takes a gradient. A meta
// output records a shape-only backward instead: each input gets a meta gradient of its shape.
Var record(Context& ctx, const char* name, std::vector<Var> inputs, Tensor value, Backward backward) {
  const bool needs_grad = std::any_of(inputs.begin(), inputs.end(), [](const Var& in) { return in.requires_grad(); });
  Var output(std::move(value), needs_grad);
  if (!needs_grad) return output;
  TapeOp op;
  op.name = name;
  op.inputs = inputs;
  op.output = output;
  if (output.value().is_meta()) {
    op.backward = [inputs](Context& c, const Tensor&) {
      for (const Var& in : inputs) add_grad(c, in, Tensor::meta(in.shape(), in.value().dtype()));
    };
  } else {
    std::vector<Shape> shapes;
    for (const Var& in : inputs) shapes.push_back(in.shape());
    op.backward = [name, inputs, shapes, backward = std::move(backward)](Context& c, const Tensor& grad) {
      check_inputs_unchanged(name, inputs, shapes);
      backward(c, grad);
    };
  }
  ctx.tape().record(std::move(op));
  return output;
}

// The gradient of an input from a gradient of the op's (possibly broadcast) output: summed over the
// broadcast dims and stored in the input's dtype.
Tensor reduce_to(Context& ctx, const Tensor& grad, const Tensor& input) {
  if (grad.shape() == input.shape() && grad.dtype() == input.dtype()) return grad;
  Tensor out = Tensor::zeros(input.shape(), input.dtype());
  ctx.kernels().sum_to_shape(grad, out);
  return out;
}

// d(a OP b)/d(operand) * grad, reduced to the operand's shape. `other` is the other operand.
Tensor binary_grad(Context& ctx, BinaryOp kind, bool is_b, const Tensor& grad, const Tensor& operand,
                   const Tensor& other) {
  if (kind == BinaryOp::mul) {
    Tensor product = Tensor::zeros(grad.shape(), promote(grad.dtype(), other.dtype()));
    ctx.kernels().binary(BinaryOp::mul, grad, other, product);
    return reduce_to(ctx, product, operand);
  }
  Tensor reduced = reduce_to(ctx, grad, operand);
  if (kind == BinaryOp::add || !is_b) return reduced;
  Tensor negated = Tensor::zeros(operand.shape(), operand.dtype());
  ctx.kernels().scale(reduced, -1.0f, negated);
  return negated;
}

Var binary_op(Context& ctx, BinaryOp kind, const char* name, const Var& a, const Var& b) {
  require_defined(name, a, "a");
  require_defined(name, b, "b");
  Shape shape;
  try {
    shape = broadcast_shapes(a.shape(), b.shape());
  } catch (const ShapeError& error) {
    throw ShapeError(std::string(name) + ": " + error.what());
  }
  Tensor out = make_output(shape, promote(a.value().dtype(), b.value().dtype()),
                           a.value().is_meta() || b.value().is_meta());
  if (!out.is_meta()) ctx.kernels().binary(kind, a.value(), b.value(), out);
  return record(ctx, name, {a, b}, out, [kind, a, b](Context& c, const Tensor& grad) {
    if (a.requires_grad()) add_grad(c, a, binary_grad(c, kind, false, grad, a.value(), b.value()));
    if (b.requires_grad()) add_grad(c, b, binary_grad(c, kind, true, grad, b.value(), a.value()));
  });
}

Var unary_op(Context& ctx, UnaryOp kind, const char* name, const Var& x) {
  require_defined(name, x, "x");
  Tensor out = make_output(x.shape(), x.value().dtype(), x.value().is_meta());
  if (!out.is_meta()) ctx.kernels().unary(kind, x.value(), out);
  return record(ctx, name, {x}, out, [kind, x](Context& c, const Tensor& grad) {
    Tensor grad_x = Tensor::zeros(x.shape(), x.value().dtype());
    c.kernels().unary_backward(kind, x.value(), grad, grad_x);
    add_grad(c, x, grad_x);
  });
}

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

// out [rows, out_features] gets `bias` in every row, as ones[rows, 1] @ bias[1, out_features].
void fill_rows_with_bias(Context& ctx, const Tensor& bias, int64_t rows, Tensor& out) {
  const Tensor ones = Tensor::full({rows, 1}, 1.0f);
  ctx.kernels().matmul(ones, false, bias, false, out, 1, rows, bias.numel(), 1, true, 0.0f);
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

// Ids and targets are floats holding integers in [0, limit); anything else is a ShapeError that
// names the value, its position and what it indexes.
void check_indices(const char* op, const char* what, const Tensor& indices, int64_t limit, const std::string& target) {
  if (indices.is_meta()) return;
  const float* values = indices.data();
  for (int64_t i = 0; i < indices.numel(); ++i) {
    const float value = values[i];
    if (!(value >= 0.0f && value < static_cast<float>(limit) && std::floor(value) == value)) {
      throw ShapeError(std::string(op) + ": " + what + " " + format_number(value) + " at position " +
                       std::to_string(i) + " is outside [0, " + std::to_string(limit) + ") of " + target);
    }
  }
}

void check_rows(const char* op, const std::vector<int64_t>& rows, int64_t limit, const std::string& target) {
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] < 0 || rows[i] >= limit) {
      throw ShapeError(std::string(op) + ": row " + std::to_string(rows[i]) + " at position " + std::to_string(i) +
                       " is outside [0, " + std::to_string(limit) + ") of " + target);
    }
  }
}

// Resolves one -1 in `shape` from numel, as PyTorch's reshape does.
Shape resolve_shape(const Shape& from, const Shape& shape) {
  const auto fail = [&]() -> Shape {
    throw ShapeError("reshape: cannot reshape " + shape_str(from) + " (" + std::to_string(shape_numel(from)) +
                     " elements) to " + shape_str(shape));
  };
  Shape resolved = shape;
  int64_t inferred = -1, known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1 && inferred < 0) inferred = static_cast<int64_t>(i);
    else if (shape[i] < 0) return fail();
    else known *= shape[i];
  }
  if (inferred >= 0) {
    if (known == 0 || shape_numel(from) % known != 0) return fail();
    resolved[inferred] = shape_numel(from) / known;
  }
  if (shape_numel(resolved) != shape_numel(from)) return fail();
  return resolved;
}

}  // namespace

Var constant(const Tensor& value) { return Var(value, /*requires_grad=*/false); }

Var add(Context& ctx, const Var& a, const Var& b) { return binary_op(ctx, BinaryOp::add, "add", a, b); }
Var sub(Context& ctx, const Var& a, const Var& b) { return binary_op(ctx, BinaryOp::sub, "sub", a, b); }
Var mul(Context& ctx, const Var& a, const Var& b) { return binary_op(ctx, BinaryOp::mul, "mul", a, b); }

Var scale(Context& ctx, const Var& x, float factor) {
  require_defined("scale", x, "x");
  Tensor out = make_output(x.shape(), x.value().dtype(), x.value().is_meta());
  if (!out.is_meta()) ctx.kernels().scale(x.value(), factor, out);
  return record(ctx, "scale", {x}, out, [x, factor](Context& c, const Tensor& grad) {
    Tensor grad_x = Tensor::zeros(x.shape(), x.value().dtype());
    c.kernels().scale(grad, factor, grad_x);
    add_grad(c, x, grad_x);
  });
}

Var gelu(Context& ctx, const Var& x) { return unary_op(ctx, UnaryOp::gelu, "gelu", x); }
Var relu(Context& ctx, const Var& x) { return unary_op(ctx, UnaryOp::relu, "relu", x); }

Var matmul(Context& ctx, const Var& a, const Var& b) {
  require_defined("matmul", a, "a");
  require_defined("matmul", b, "b");
  const MatmulPlan p = plan_matmul(a.shape(), b.shape());
  Tensor out = make_output(p.out_shape, promote(a.value().dtype(), b.value().dtype()),
                           a.value().is_meta() || b.value().is_meta());
  if (!out.is_meta()) {
    ctx.kernels().matmul(a.value(), false, b.value(), false, out, p.batch, p.m, p.n, p.k, p.b_shared, 0.0f);
  }
  return record(ctx, "matmul", {a, b}, out, [a, b, p](Context& c, const Tensor& grad) {
    if (a.requires_grad()) {
      Tensor grad_a = Tensor::zeros(a.shape(), a.value().dtype());
      c.kernels().matmul(grad, false, b.value(), true, grad_a, p.batch, p.m, p.k, p.n, p.b_shared, 0.0f);
      add_grad(c, a, grad_a);
    }
    if (b.requires_grad()) {
      Tensor grad_b = Tensor::zeros(b.shape(), b.value().dtype());
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
  Tensor out = make_output(out_shape, dtype, meta);
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
      Tensor grad_x = Tensor::zeros(x.shape(), x.value().dtype());
      c.kernels().matmul(grad, false, weight.value(), false, grad_x, 1, rows, in_features, out_features, true, 0.0f);
      add_grad(c, x, grad_x);
    }
    if (weight.requires_grad()) {
      Tensor grad_w = Tensor::zeros(weight.shape(), weight.value().dtype());
      c.kernels().matmul(grad, true, x.value(), false, grad_w, 1, out_features, in_features, rows, true, 0.0f);
      add_grad(c, weight, grad_w);
    }
    if (bias.requires_grad()) add_grad(c, bias, reduce_to(c, grad, bias.value()));
  };
  return record(ctx, "linear", inputs, out, linear_backward);
}

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
  Tensor out = make_output(xs, dtype, meta);
  Tensor mean = make_output({rows}, DType::f32, meta);
  Tensor rstd = make_output({rows}, DType::f32, meta);
  if (!meta) ctx.kernels().layer_norm_forward(x.value(), gamma.value(), beta.value(), eps, out, mean, rstd);
  return record(ctx, "layer_norm", {x, gamma, beta}, out, [x, gamma, beta, mean, rstd](Context& c, const Tensor& grad) {
    Tensor grad_x = Tensor::zeros(x.shape(), x.value().dtype());
    Tensor grad_gamma = Tensor::zeros(gamma.shape(), gamma.value().dtype());
    Tensor grad_beta = Tensor::zeros(beta.shape(), beta.value().dtype());
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
  Tensor out = make_output(out_shape, table.value().dtype(), table.value().is_meta() || ids.is_meta());
  if (!out.is_meta()) ctx.kernels().embedding_forward(table.value(), ids, out);
  return record(ctx, "embedding", {table}, out, [table, ids](Context& c, const Tensor& grad) {
    Tensor grad_table = Tensor::zeros(table.shape(), table.value().dtype());
    c.kernels().embedding_backward_into(grad, ids, grad_table);
    add_grad(c, table, grad_table);
  });
}

Var reshape(Context& ctx, const Var& x, const Shape& shape) {
  require_defined("reshape", x, "x");
  const Shape resolved = resolve_shape(x.shape(), shape);
  return record(ctx, "reshape", {x}, x.value().reshape(resolved), [x](Context& c, const Tensor& grad) {
    add_grad(c, x, reduce_to(c, grad.reshape(x.shape()), x.value()));
  });
}

Var transpose(Context& ctx, const Var& x, int64_t dim0, int64_t dim1) {
  require_defined("transpose", x, "x");
  const int64_t rank = x.value().rank();
  std::vector<int64_t> perm(static_cast<size_t>(rank));
  for (int64_t d = 0; d < rank; ++d) perm[d] = d;
  const int64_t d0 = normalize_dim("transpose", dim0, rank, x.shape());
  const int64_t d1 = normalize_dim("transpose", dim1, rank, x.shape());
  std::swap(perm[d0], perm[d1]);
  Shape out_shape(perm.size());
  for (size_t d = 0; d < perm.size(); ++d) out_shape[d] = x.shape()[perm[d]];
  Tensor out = make_output(out_shape, x.value().dtype(), x.value().is_meta());
  if (!out.is_meta()) ctx.kernels().permute(x.value(), perm, out);
  // A swap of two dims is its own inverse, so backward applies the same permutation.
  return record(ctx, "transpose", {x}, out, [x, perm](Context& c, const Tensor& grad) {
    Tensor grad_x = Tensor::zeros(x.shape(), x.value().dtype());
    c.kernels().permute(grad, perm, grad_x);
    add_grad(c, x, grad_x);
  });
}

Var slice(Context& ctx, const Var& x, int64_t dim, int64_t start, int64_t length) {
  require_defined("slice", x, "x");
  const int64_t d = normalize_dim("slice", dim, x.value().rank(), x.shape());
  if (start < 0 || length < 0 || start + length > x.shape()[d]) {
    throw ShapeError("slice: [" + std::to_string(start) + ", " + std::to_string(start + length) + ") of dim " +
                     std::to_string(dim) + " is outside " + shape_str(x.shape()));
  }
  Shape out_shape = x.shape();
  out_shape[d] = length;
  Tensor out = make_output(out_shape, x.value().dtype(), x.value().is_meta());
  if (!out.is_meta()) ctx.kernels().slice(x.value(), d, start, out);
  return record(ctx, "slice", {x}, out, [x, d, start](Context& c, const Tensor& grad) {
    Tensor grad_x = Tensor::zeros(x.shape(), x.value().dtype());
    c.kernels().slice_backward_into(grad, d, start, grad_x);
    add_grad(c, x, grad_x);
  });
}

Var concat(Context& ctx, const std::vector<Var>& parts, int64_t dim) {
  if (parts.empty()) throw ShapeError("concat: no parts");
  for (const Var& part : parts) require_defined("concat", part, "a part");
  const Shape& first = parts[0].shape();
  const int64_t d = normalize_dim("concat", dim, static_cast<int64_t>(first.size()), first);
  Shape out_shape = first;
  out_shape[d] = 0;
  DType dtype = parts[0].value().dtype();
  bool meta = false;
  for (const Var& part : parts) {
    Shape expected = first;
    expected[d] = part.shape().size() == first.size() ? part.shape()[d] : -1;
    if (part.shape() != expected) {
      throw ShapeError("concat: part " + shape_str(part.shape()) + " does not match " + shape_str(first) +
                       " outside dim " + std::to_string(dim));
    }
    out_shape[d] += part.shape()[d];
    dtype = promote(dtype, part.value().dtype());
    meta = meta || part.value().is_meta();
  }
  Tensor out = make_output(out_shape, dtype, meta);
  int64_t offset = 0;
  for (const Var& part : parts) {
    if (!meta) ctx.kernels().slice_backward_into(part.value(), d, offset, out);
    offset += part.shape()[d];
  }
  return record(ctx, "concat", parts, out, [parts, d](Context& c, const Tensor& grad) {
    int64_t start = 0;
    for (const Var& part : parts) {
      Tensor grad_part = Tensor::zeros(part.shape(), part.value().dtype());
      c.kernels().slice(grad, d, start, grad_part);
      add_grad(c, part, grad_part);
      start += part.shape()[d];
    }
  });
}

Var select_rows(Context& ctx, const Var& x, const std::vector<int64_t>& rows) {
  require_defined("select_rows", x, "x");
  if (x.value().rank() != 2) throw ShapeError("select_rows: x " + shape_str(x.shape()) + " is not [N, C]");
  check_rows("select_rows", rows, x.shape()[0], "x " + shape_str(x.shape()));
  Tensor out = make_output({static_cast<int64_t>(rows.size()), x.shape()[1]}, x.value().dtype(), x.value().is_meta());
  if (!out.is_meta()) ctx.kernels().select_rows(x.value(), rows, out);
  return record(ctx, "select_rows", {x}, out, [x, rows](Context& c, const Tensor& grad) {
    Tensor grad_x = Tensor::zeros(x.shape(), x.value().dtype());
    c.kernels().select_rows_backward_into(grad, rows, grad_x);
    add_grad(c, x, grad_x);
  });
}

Var scatter_rows(Context& ctx, const Var& rows_values, const std::vector<int64_t>& rows, int64_t n_rows) {
  require_defined("scatter_rows", rows_values, "rows_values");
  const Shape& vs = rows_values.shape();
  if (vs.size() != 2 || vs[0] != static_cast<int64_t>(rows.size()) || n_rows < 0) {
    throw ShapeError("scatter_rows: rows_values " + shape_str(vs) + " for " + std::to_string(rows.size()) +
                     " rows into " + std::to_string(n_rows) + " (want [rows, C] and n_rows >= 0)");
  }
  check_rows("scatter_rows", rows, n_rows, "the " + std::to_string(n_rows) + "-row output");
  if (std::set<int64_t>(rows.begin(), rows.end()).size() != rows.size()) {
    throw ShapeError("scatter_rows: row indices are not unique");
  }
  Tensor out = make_output({n_rows, vs[1]}, rows_values.value().dtype(), rows_values.value().is_meta());
  if (!out.is_meta()) ctx.kernels().select_rows_backward_into(rows_values.value(), rows, out);
  return record(ctx, "scatter_rows", {rows_values}, out, [rows_values, rows](Context& c, const Tensor& grad) {
    Tensor grad_values = Tensor::zeros(rows_values.shape(), rows_values.value().dtype());
    c.kernels().select_rows(grad, rows, grad_values);
    add_grad(c, rows_values, grad_values);
  });
}

Var sum(Context& ctx, const Var& x) {
  require_defined("sum", x, "x");
  Tensor out = make_output({}, x.value().dtype(), x.value().is_meta());
  if (!out.is_meta()) ctx.kernels().sum_all(x.value(), out);
  return record(ctx, "sum", {x}, out, [x](Context& c, const Tensor& grad) {
    Tensor grad_x = Tensor::zeros(x.shape(), x.value().dtype());
    c.kernels().fill(grad_x, grad.item());
    add_grad(c, x, grad_x);
  });
}

Var mean(Context& ctx, const Var& x) {
  require_defined("mean", x, "x");
  if (x.value().numel() == 0) throw ShapeError("mean: " + describe(x.value()) + " is empty and has no mean");
  const auto count = static_cast<float>(x.value().numel());
  Tensor out = make_output({}, x.value().dtype(), x.value().is_meta());
  if (!out.is_meta()) {
    Tensor total = Tensor::zeros({});  // f32, so a bf16 mean is rounded once
    ctx.kernels().sum_all(x.value(), total);
    ctx.kernels().scale(total, 1.0f / count, out);
  }
  return record(ctx, "mean", {x}, out, [x, count](Context& c, const Tensor& grad) {
    Tensor grad_x = Tensor::zeros(x.shape(), x.value().dtype());
    c.kernels().fill(grad_x, grad.item() / count);
    add_grad(c, x, grad_x);
  });
}

Var causal_softmax(Context& ctx, const Var& scores) {
  require_defined("causal_softmax", scores, "scores");
  const Shape& ss = scores.shape();
  if (ss.size() < 2 || ss[ss.size() - 1] != ss[ss.size() - 2]) {
    throw ShapeError("causal_softmax: scores " + shape_str(ss) + " are not [..., T, T]");
  }
  Tensor out = make_output(ss, scores.value().dtype(), scores.value().is_meta());
  if (!out.is_meta()) ctx.kernels().causal_softmax_forward(scores.value(), out);
  // The probabilities are a saved intermediate, not a parameter, so backward may capture them.
  return record(ctx, "causal_softmax", {scores}, out, [scores, out](Context& c, const Tensor& grad) {
    Tensor grad_scores = Tensor::zeros(scores.shape(), scores.value().dtype());
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

Var cross_entropy(Context& ctx, const Var& logits, const Tensor& targets) {
  require_defined("cross_entropy", logits, "logits");
  ZERO3_CHECK(targets.defined(), "cross_entropy: targets are undefined");
  const Shape& ls = logits.shape();
  if (ls.size() != 2 || targets.shape() != Shape{ls[0]} || ls[0] == 0) {
    throw ShapeError("cross_entropy: logits " + shape_str(ls) + ", targets " + shape_str(targets.shape()) +
                     " (want logits [N, V] and targets [N] with N > 0: the mean of no rows is undefined)");
  }
  check_indices("cross_entropy", "target", targets, ls[1], "logits " + shape_str(ls));
  const bool meta = logits.value().is_meta() || targets.is_meta();
  Tensor loss = make_output({}, logits.value().dtype(), meta);
  Tensor probs = make_output(ls, DType::f32, meta);
  if (!meta) ctx.kernels().cross_entropy_forward(logits.value(), targets, loss, probs);
  return record(ctx, "cross_entropy", {logits}, loss, [logits, targets, probs](Context& c, const Tensor& grad) {
    Tensor grad_logits = Tensor::zeros(logits.shape(), logits.value().dtype());
    c.kernels().cross_entropy_backward(probs, targets, grad.item(), grad_logits);
    add_grad(c, logits, grad_logits);
  });
}

Var mse(Context& ctx, const Var& pred, const Tensor& target) {
  require_defined("mse", pred, "pred");
  ZERO3_CHECK(target.defined(), "mse: target is undefined");
  // No broadcasting here: a loss that silently broadcasts pred against target is the trap itself.
  if (pred.shape() != target.shape() || target.numel() == 0) {
    throw ShapeError("mse: pred " + shape_str(pred.shape()) + ", target " + shape_str(target.shape()) +
                     " (want equal, non-empty shapes)");
  }
  const auto count = static_cast<float>(target.numel());
  const bool meta = pred.value().is_meta() || target.is_meta();
  Tensor loss = make_output({}, promote(pred.value().dtype(), target.dtype()), meta);
  const auto difference = [target](Context& c, const Tensor& p) {
    Tensor diff = Tensor::zeros(p.shape());
    c.kernels().binary(BinaryOp::sub, p, target, diff);
    return diff;
  };
  if (!meta) {
    const double squares = ctx.kernels().sum_of_squares(difference(ctx, pred.value()));
    Tensor total = Tensor::scalar(static_cast<float>(squares / target.numel()));
    ctx.kernels().copy(total, loss);
  }
  return record(ctx, "mse", {pred}, loss, [pred, difference, count](Context& c, const Tensor& grad) {
    Tensor grad_pred = Tensor::zeros(pred.shape(), pred.value().dtype());
    c.kernels().scale(difference(c, pred.value()), 2.0f * grad.item() / count, grad_pred);
    add_grad(c, pred, grad_pred);
  });
}

Var to_bf16(Context& ctx, const Var& x) {
  require_defined("to_bf16", x, "x");
  Tensor out = make_output(x.shape(), DType::bf16, x.value().is_meta());
  if (!out.is_meta()) ctx.kernels().copy(x.value(), out);
  return record(ctx, "to_bf16", {x}, out, [x](Context& c, const Tensor& grad) {
    Tensor grad_x = Tensor::zeros(x.shape(), x.value().dtype());
    c.kernels().copy(grad, grad_x);
    add_grad(c, x, grad_x);
  });
}

}  // namespace zero3
