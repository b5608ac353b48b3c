// The elementwise ops: add, sub and mul with PyTorch broadcasting, scale, gelu, relu, silu and to_bf16.
#include "core/autograd/ops.h"

#include <string>

#include "core/base/errors.h"
#include "core/autograd/ops_internal.h"

namespace zero3 {
namespace {

// d(a OP b)/d(operand) * grad, reduced to the operand's shape. `other` is the other operand.
Tensor binary_grad(Context& ctx, BinaryOp kind, bool is_b, const Tensor& grad, const Tensor& operand,
                   const Tensor& other) {
  if (kind == BinaryOp::mul) {
    Tensor product = device_uninitialized(ctx.kernels(), grad.shape(), promote(grad.dtype(), other.dtype()));
    ctx.kernels().binary(BinaryOp::mul, grad, other, product);
    return reduce_to(ctx, product, operand);
  }
  Tensor reduced = reduce_to(ctx, grad, operand);
  if (kind == BinaryOp::add || !is_b) return reduced;
  Tensor negated = device_uninitialized(ctx.kernels(), operand.shape(), operand.dtype());
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
  Tensor out = make_output(ctx, shape, promote(a.value().dtype(), b.value().dtype()),
                           a.value().is_meta() || b.value().is_meta());
  if (!out.is_meta()) ctx.kernels().binary(kind, a.value(), b.value(), out);
  return record(ctx, name, [kind, name, a, b](Context& c) { binary_op(c, kind, name, a, b); }, {a, b}, out, [kind, a, b](Context& c, const Tensor& grad) {
    if (a.requires_grad()) add_grad(c, a, binary_grad(c, kind, false, grad, a.value(), b.value()));
    if (b.requires_grad()) add_grad(c, b, binary_grad(c, kind, true, grad, b.value(), a.value()));
  });
}

Var unary_op(Context& ctx, UnaryOp kind, const char* name, const Var& x) {
  require_defined(name, x, "x");
  Tensor out = make_output(ctx, x.shape(), x.value().dtype(), x.value().is_meta());
  if (!out.is_meta()) ctx.kernels().unary(kind, x.value(), out);
  return record(ctx, name, [kind, name, x](Context& c) { unary_op(c, kind, name, x); }, {x}, out, [kind, x](Context& c, const Tensor& grad) {
    Tensor grad_x = device_uninitialized(c.kernels(), x.shape(), x.value().dtype());
    c.kernels().unary_backward(kind, x.value(), grad, grad_x);
    add_grad(c, x, grad_x);
  });
}

}  // namespace

Var add(Context& ctx, const Var& a, const Var& b) { return binary_op(ctx, BinaryOp::add, "add", a, b); }
Var sub(Context& ctx, const Var& a, const Var& b) { return binary_op(ctx, BinaryOp::sub, "sub", a, b); }
Var mul(Context& ctx, const Var& a, const Var& b) { return binary_op(ctx, BinaryOp::mul, "mul", a, b); }

Var scale(Context& ctx, const Var& x, float factor) {
  require_defined("scale", x, "x");
  Tensor out = make_output(ctx, x.shape(), x.value().dtype(), x.value().is_meta());
  if (!out.is_meta()) ctx.kernels().scale(x.value(), factor, out);
  return record(ctx, "scale", [x, factor](Context& c) { scale(c, x, factor); }, {x}, out, [x, factor](Context& c, const Tensor& grad) {
    Tensor grad_x = device_uninitialized(c.kernels(), x.shape(), x.value().dtype());
    c.kernels().scale(grad, factor, grad_x);
    add_grad(c, x, grad_x);
  });
}

Var gelu(Context& ctx, const Var& x) { return unary_op(ctx, UnaryOp::gelu, "gelu", x); }
Var relu(Context& ctx, const Var& x) { return unary_op(ctx, UnaryOp::relu, "relu", x); }
Var silu(Context& ctx, const Var& x) { return unary_op(ctx, UnaryOp::silu, "silu", x); }

Var to_bf16(Context& ctx, const Var& x) {
  require_defined("to_bf16", x, "x");
  Tensor out = make_output(ctx, x.shape(), DType::bf16, x.value().is_meta());
  if (!out.is_meta()) ctx.kernels().copy(x.value(), out);
  return record(ctx, "to_bf16", [x](Context& c) { to_bf16(c, x); }, {x}, out, [x](Context& c, const Tensor& grad) {
    Tensor grad_x = device_uninitialized(c.kernels(), x.shape(), x.value().dtype());
    c.kernels().copy(grad, grad_x);
    add_grad(c, x, grad_x);
  });
}

}  // namespace zero3
