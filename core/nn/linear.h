// Linear: y = x @ weight^T + bias with PyTorch's [out, in] weight layout. Either width may be 0:
// Linear(8, 0) owns only zero-sized parameters and still takes part in forward and backward.
#pragma once
#include "core/nn/layer.h"

namespace zero3 {

class Linear : public Layer {
 public:
  // weight ~ N(0, init_std); bias (when present) starts at zero.
  Linear(int64_t in_features, int64_t out_features, bool has_bias, float init_std);

  int64_t in_features() const { return in_features_; }
  int64_t out_features() const { return out_features_; }
  Parameter& weight() const { return weight_; }
  Parameter* bias() const { return bias_; }
  Var forward(Context& ctx, const Var& x) override;

 private:
  int64_t in_features_;
  int64_t out_features_;
  Parameter& weight_;
  Parameter* bias_ = nullptr;
};

}  // namespace zero3
