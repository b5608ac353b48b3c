// TiedLinear: a linear layer that computes with another module's 2-D weight, reached through the
// checked accessor as an external parameter (a tied LM head, `F.linear(x, other.weight)`). It
// owns no weight; with a bias it owns exactly that, mixing own and external parameters.
#pragma once
#include "core/nn/layer.h"

namespace zero3 {

class TiedLinear : public Layer {
 public:
  // `weight` is [out, in] as in Linear; `transposed` computes x @ weight instead, mapping out -> in.
  TiedLinear(Parameter& weight, bool transposed, bool has_bias);

  int64_t in_features() const;
  int64_t out_features() const;
  Parameter& tied_weight() const { return weight_; }
  Var forward(Context& ctx, const Var& x) override;

 private:
  Parameter& weight_;
  bool transposed_;
  Parameter* bias_ = nullptr;
};

}  // namespace zero3
