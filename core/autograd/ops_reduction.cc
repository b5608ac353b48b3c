// The ops that reduce a tensor to a scalar: sum, mean and the losses cross_entropy and mse.
#include "core/autograd/ops.h"

#include <string>

#include "core/base/errors.h"
#include "core/autograd/ops_internal.h"

namespace zero3 {

Var sum(Context& ctx, const Var& x) {
  require_defined("sum", x, "x");
  Tensor out = make_output(ctx, {}, x.value().dtype(), x.value().is_meta());
  if (!out.is_meta()) ctx.kernels().sum_all(x.value(), out);
  return record(ctx, "sum", [x](Context& c) { sum(c, x); }, {x}, out, [x](Context& c, const Tensor& grad) {
    Tensor grad_x = device_uninitialized(c.kernels(), x.shape(), x.value().dtype());
    c.kernels().fill_from_scalar(grad_x, grad, 1.0f, 1.0f);
    add_grad(c, x, grad_x);
  });
}

Var mean(Context& ctx, const Var& x) {
  require_defined("mean", x, "x");
  if (x.value().numel() == 0) throw ShapeError("mean: " + describe(x.value()) + " is empty and has no mean");
  const auto count = static_cast<float>(x.value().numel());
  Tensor out = make_output(ctx, {}, x.value().dtype(), x.value().is_meta());
  if (!out.is_meta()) {
    Tensor total = device_uninitialized(ctx.kernels(), {});  // f32, so a bf16 mean is rounded once
    ctx.kernels().sum_all(x.value(), total);
    ctx.kernels().scale(total, 1.0f / count, out);
  }
  return record(ctx, "mean", [x](Context& c) { mean(c, x); }, {x}, out, [x, count](Context& c, const Tensor& grad) {
    Tensor grad_x = device_uninitialized(c.kernels(), x.shape(), x.value().dtype());
    c.kernels().fill_from_scalar(grad_x, grad, 1.0f, count);
    add_grad(c, x, grad_x);
  });
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
  Tensor loss = make_output(ctx, {}, logits.value().dtype(), meta);
  Tensor probs = make_output(ctx, ls, DType::f32, meta);
  const Tensor resident_targets = ctx.kernels().to_device(targets);
  if (!meta) ctx.kernels().cross_entropy_forward(logits.value(), resident_targets, loss, probs);
  return record(ctx, "cross_entropy", [logits, targets](Context& c) { cross_entropy(c, logits, targets); }, {logits}, loss,
                [logits, targets = resident_targets, probs](Context& c, const Tensor& grad) {
    Tensor grad_logits = device_uninitialized(c.kernels(), logits.shape(), logits.value().dtype());
    c.kernels().cross_entropy_backward(probs, targets, grad, grad_logits);
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
  Tensor loss = make_output(ctx, {}, promote(pred.value().dtype(), target.dtype()), meta);
  const auto difference = [target = ctx.kernels().to_device(target)](Context& c, const Tensor& p) {
    Tensor diff = device_uninitialized(c.kernels(), p.shape());
    c.kernels().binary(BinaryOp::sub, p, target, diff);
    return diff;
  };
  if (!meta) {
    const Tensor diff = difference(ctx, pred.value());
    Tensor total = device_zeros(ctx.kernels(), {});
    ctx.kernels().sum_of_squares_into({{.tensor = &diff, .begin = 0, .end = diff.numel()}}, total, 0,
                                      static_cast<double>(target.numel()));
    ctx.kernels().copy(total, loss);
  }
  return record(ctx, "mse", [pred, target](Context& c) { mse(c, pred, target); }, {pred}, loss, [pred, difference, count](Context& c, const Tensor& grad) {
    Tensor grad_pred = device_uninitialized(c.kernels(), pred.shape(), pred.value().dtype());
    c.kernels().scale_by_scalar(difference(c, pred.value()), grad, 2.0f, count, grad_pred);
    add_grad(c, pred, grad_pred);
  });
}

}  // namespace zero3
