// RMSNorm over the last dim (LLaMA's norm): x / sqrt(mean(x^2) + eps) times a learnable
// per-feature gain (ones); no mean subtracted and no bias, unlike LayerNorm.
#pragma once
#include "core/nn/layer.h"

namespace zero3 {

class RmsNorm : public Layer {
 public:
  explicit RmsNorm(int64_t width, float eps = 1e-5f);

  Parameter& weight() const { return weight_; }
  Var forward(Context& ctx, const Var& x) override;

 private:
  float eps_;
  Parameter& weight_;
};

}  // namespace zero3
