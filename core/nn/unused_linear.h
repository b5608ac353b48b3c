// UnusedLinear: registers a Linear's parameters but never uses them; forward is the identity.
// Models real modules whose parameters sit out a step (failure class 9, README.md "Design"): they get no gradient,
// yet every rank must still take part in their reduce-scatter with zeros.
#pragma once
#include "core/nn/layer.h"

namespace zero3 {

class UnusedLinear : public Layer {
 public:
  UnusedLinear(int64_t in_features, int64_t out_features, bool has_bias, float init_std);
  Parameter& weight() const { return weight_; }
  Var forward(Context& ctx, const Var& x) override;

 private:
  Parameter& weight_;
};

}  // namespace zero3
