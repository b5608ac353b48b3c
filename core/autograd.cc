// Vars, the tape, and reverse-mode backpropagation with module markers.
#include "core/autograd.h"

#include "core/context.h"
#include "core/errors.h"

namespace zero3 {

Var::Var(Tensor value, bool requires_grad) : node_(std::make_shared<VarNode>()) {
  node_->value = std::move(value);
  node_->requires_grad = requires_grad;
}

const Tensor& Var::value() const {
  ZERO3_CHECK(node_, "value() of an undefined Var");
  return node_->value;
}

Tensor& Var::mutable_value() {
  ZERO3_CHECK(node_, "mutable_value() of an undefined Var");
  return node_->value;
}

const Tensor& Var::grad() const {
  ZERO3_CHECK(node_, "grad() of an undefined Var");
  return node_->grad;
}

bool Var::requires_grad() const { return node_ && node_->requires_grad; }

void Var::accumulate_grad(Context& ctx, const Tensor& gradient) {
  ZERO3_CHECK(node_, "accumulate_grad on an undefined Var");
  if (!node_->requires_grad) return;
  if (gradient.shape() != node_->value.shape()) {
    throw ShapeError("gradient " + describe(gradient) + " does not match value " + describe(node_->value));
  }
  if (!node_->grad.defined()) {
    node_->grad = gradient.clone();
    return;
  }
  // Shape-only (meta) backward: a sum of gradients has the value's shape and no data to add, and
  // kernels never see meta tensors.
  if (node_->grad.is_meta() || gradient.is_meta()) {
    node_->grad = Tensor::meta(node_->value.shape(), node_->grad.dtype());
    return;
  }
  ctx.kernels().add_into(node_->grad, gradient);
}

void Var::clear_grad() {
  if (node_) node_->grad = Tensor();
}

void Tape::record(TapeOp op) {
  TapeEntry entry;
  entry.op = std::move(op);
  entries_.push_back(std::move(entry));
}

void Tape::mark(MarkerKind kind, Module* module, int64_t invocation) {
  TapeEntry entry;
  entry.is_marker = true;
  entry.marker = ModuleMarker{kind, module, invocation};
  entries_.push_back(std::move(entry));
}

void backward(Context& ctx, const Var& loss) {
  ZERO3_CHECK(loss.defined() && loss.value().numel() == 1, "backward() needs a scalar loss, got " +
                                                               describe(loss.value()));
  Var seed = loss;
  seed.accumulate_grad(ctx, Tensor::full(loss.value().shape(), 1.0f, loss.value().dtype()));
  const auto& entries = ctx.tape().entries();
  for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
    if (it->is_marker) {
      // Reversed: an exit marker starts the module's backward, its enter marker ends it.
      ctx.current_invocation_ = it->marker.invocation;
      if (it->marker.kind == MarkerKind::module_exit) ctx.hooks().pre_backward(ctx, *it->marker.module);
      else ctx.hooks().post_backward(ctx, *it->marker.module);
      continue;
    }
    const TapeOp& op = it->op;
    if (!op.output.grad().defined()) continue;  // nothing downstream of this op reached the loss
    op.backward(ctx, op.output.grad());
  }
  ctx.tape().clear();
}

}  // namespace zero3
