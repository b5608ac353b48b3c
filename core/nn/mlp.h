// Mlp: the two-layer feed-forward block fc [C -> hidden], GELU, proj [hidden -> C]. GPT blocks and
// MoE experts are both Mlps; a zero hidden width makes an expert of zero-sized parameters.
#pragma once
#include "core/nn/activation.h"
#include "core/nn/linear.h"

namespace zero3 {

class Mlp : public Layer {
 public:
  Mlp(int64_t width, int64_t hidden, float init_std, float proj_init_std);

  Linear& fc() const { return fc_; }
  Linear& proj() const { return proj_; }
  Var forward(Context& ctx, const Var& x) override;

 private:
  Linear& fc_;
  Activation& act_;
  Linear& proj_;
};

}  // namespace zero3
