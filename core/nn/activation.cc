// Activation layers.
#include "core/nn/activation.h"

namespace zero3 {

Activation::Activation(ActivationKind kind) : Layer(kind == ActivationKind::gelu ? "gelu" : "relu"), kind_(kind) {}

Var Activation::forward(Context& ctx, const Var& x) {
  return ctx.invoke(*this, [&] { return kind_ == ActivationKind::gelu ? gelu(ctx, x) : relu(ctx, x); });
}

}  // namespace zero3
