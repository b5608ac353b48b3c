// LayerNorm over the last dim, with a learnable per-feature gain (ones) and bias (zeros).
#pragma once
#include "core/nn/layer.h"

namespace zero3 {

class LayerNorm : public Layer {
 public:
  explicit LayerNorm(int64_t width, float eps = 1e-5f);

  Parameter& weight() const { return weight_; }
  Parameter& bias() const { return bias_; }
  Var forward(Context& ctx, const Var& x) override;

 private:
  float eps_;
  Parameter& weight_;
  Parameter& bias_;
};

}  // namespace zero3
