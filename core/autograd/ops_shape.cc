// The shape ops: reshape, transpose, slice, concat, select_rows and scatter_rows.
#include "core/autograd/ops.h"

#include <set>
#include <string>
#include <utility>

#include "core/base/errors.h"
#include "core/autograd/ops_internal.h"

namespace zero3 {
namespace {

int64_t normalize_dim(const char* op, int64_t dim, int64_t rank, const Shape& shape) {
  if (dim < -rank || dim >= rank) {
    throw ShapeError(std::string(op) + ": dim " + std::to_string(dim) + " out of range for " + shape_str(shape));
  }
  return dim < 0 ? dim + rank : dim;
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

Var reshape(Context& ctx, const Var& x, const Shape& shape) {
  require_defined("reshape", x, "x");
  const Shape resolved = resolve_shape(x.shape(), shape);
  return record(ctx, "reshape", [x, shape](Context& c) { reshape(c, x, shape); }, {x}, x.value().reshape(resolved), [x](Context& c, const Tensor& grad) {
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
  Tensor out = make_output(ctx, out_shape, x.value().dtype(), x.value().is_meta());
  if (!out.is_meta()) ctx.kernels().permute(x.value(), perm, out);
  // A swap of two dims is its own inverse, so backward applies the same permutation.
  return record(ctx, "transpose", [x, dim0, dim1](Context& c) { transpose(c, x, dim0, dim1); }, {x}, out, [x, perm](Context& c, const Tensor& grad) {
    Tensor grad_x = device_uninitialized(c.kernels(), x.shape(), x.value().dtype());
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
  Tensor out = make_output(ctx, out_shape, x.value().dtype(), x.value().is_meta());
  if (!out.is_meta()) ctx.kernels().slice(x.value(), d, start, out);
  return record(ctx, "slice", [x, dim, start, length](Context& c) { slice(c, x, dim, start, length); }, {x}, out, [x, d, start](Context& c, const Tensor& grad) {
    Tensor grad_x = device_zeros(c.kernels(), x.shape(), x.value().dtype());
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
  Tensor out = make_zeroed_output(ctx, out_shape, dtype, meta);
  int64_t offset = 0;
  for (const Var& part : parts) {
    if (!meta) ctx.kernels().slice_backward_into(part.value(), d, offset, out);
    offset += part.shape()[d];
  }
  return record(ctx, "concat", [parts, dim](Context& c) { concat(c, parts, dim); }, parts, out, [parts, d](Context& c, const Tensor& grad) {
    int64_t start = 0;
    for (const Var& part : parts) {
      Tensor grad_part = device_uninitialized(c.kernels(), part.shape(), part.value().dtype());
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
  Tensor out = make_output(ctx, {static_cast<int64_t>(rows.size()), x.shape()[1]}, x.value().dtype(), x.value().is_meta());
  if (!out.is_meta()) ctx.kernels().select_rows(x.value(), rows, out);
  return record(ctx, "select_rows", [x, rows](Context& c) { select_rows(c, x, rows); }, {x}, out, [x, rows](Context& c, const Tensor& grad) {
    Tensor grad_x = device_zeros(c.kernels(), x.shape(), x.value().dtype());
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
  Tensor out = make_zeroed_output(ctx, {n_rows, vs[1]}, rows_values.value().dtype(), rows_values.value().is_meta());
  if (!out.is_meta()) ctx.kernels().select_rows_backward_into(rows_values.value(), rows, out);
  return record(ctx, "scatter_rows", [rows_values, rows, n_rows](Context& c) { scatter_rows(c, rows_values, rows, n_rows); }, {rows_values}, out, [rows_values, rows](Context& c, const Tensor& grad) {
    Tensor grad_values = device_uninitialized(c.kernels(), rows_values.shape(), rows_values.value().dtype());
    c.kernels().select_rows(grad, rows, grad_values);
    add_grad(c, rows_values, grad_values);
  });
}

}  // namespace zero3
