// Activation: GELU (tanh approximation, as GPT-2) or ReLU as a parameterless layer, so that a
// model spec can place it between layers and the tape shows it as a module.
#pragma once
#include "core/nn/layer.h"

namespace zero3 {

enum class ActivationKind : uint8_t { gelu, relu };

class Activation : public Layer {
 public:
  explicit Activation(ActivationKind kind);
  ActivationKind kind() const { return kind_; }
  Var forward(Context& ctx, const Var& x) override;

 private:
  ActivationKind kind_;
};

}  // namespace zero3
