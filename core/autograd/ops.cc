// The machinery every op shares (declared in ops_internal.h): dtype promotion, output allocation,
// input and index checks, and recording the backward closure on the tape; and constant().
#include "core/autograd/ops_internal.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/base/errors.h"

namespace zero3 {
namespace {

std::string format_number(double value) {
  std::ostringstream text;
  text << value;
  return text.str();
}

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

}  // namespace

DType promote(DType a, DType b) { return a == DType::bf16 && b == DType::bf16 ? DType::bf16 : DType::f32; }

Tensor make_output(Context& ctx, const Shape& shape, DType dtype, bool meta) {
  return Tensor::uninitialized(shape, dtype, meta ? Device::meta : ctx.kernels().device());
}

Tensor make_zeroed_output(Context& ctx, const Shape& shape, DType dtype, bool meta) {
  return Tensor::zeros(shape, dtype, meta ? Device::meta : ctx.kernels().device());
}

void require_defined(const char* op, const Var& var, const char* what) {
  ZERO3_CHECK(var.defined() && var.value().defined(), std::string(op) + ": " + what + " is undefined");
}

void add_grad(Context& ctx, Var var, const Tensor& gradient) { var.accumulate_grad(ctx, gradient); }

Var record(Context& ctx, const char* name, Rerun rerun, std::vector<Var> inputs, Tensor value, Backward backward,
           int64_t saved_bytes) {
  const bool needs_grad = std::any_of(inputs.begin(), inputs.end(), [](const Var& in) { return in.requires_grad(); });
  Var output(std::move(value), needs_grad);
  if (!needs_grad) return output;
  TapeOp op;
  op.name = name;
  op.inputs = inputs;
  op.output = output;
  op.saved_bytes = saved_bytes;
  op.recompute = std::move(rerun);
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

Tensor reduce_to(Context& ctx, const Tensor& grad, const Tensor& input) {
  if (grad.shape() == input.shape() && grad.dtype() == input.dtype()) return grad;
  Tensor out = device_uninitialized(ctx.kernels(), input.shape(), input.dtype());
  ctx.kernels().sum_to_shape(grad, out);
  return out;
}

void check_indices(const char* op, const char* what, const Tensor& indices, int64_t limit, const std::string& target) {
  if (indices.is_meta()) return;
  // Ids come from the host (the data source); they are checked there, before their upload.
  const float* values = indices.data();
  for (int64_t i = 0; i < indices.numel(); ++i) {
    const float value = values[i];
    if (!(value >= 0.0f && value < static_cast<float>(limit) && std::floor(value) == value)) {
      throw ShapeError(std::string(op) + ": " + what + " " + format_number(value) + " at position " +
                       std::to_string(i) + " is outside [0, " + std::to_string(limit) + ") of " + target);
    }
  }
}

Var constant(const Tensor& value) { return Var(value, /*requires_grad=*/false); }

}  // namespace zero3
