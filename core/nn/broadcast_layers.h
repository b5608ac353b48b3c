// Layers that use a parameter in a broadcasting elementwise op on x [N, width]:
//   Scale     x * p   through the checked accessor (a per-feature scale, a scalar gate)
//   Bias      x + p   through the checked accessor (a [0] bias against [N, 1] gives [N, 0])
//   RawScale  x * p   through ctx.raw(p), as a constant, mirroring user code that caches
//                     `param.data`: while p is partitioned it sees the placeholder, and
//                     broadcasting may hide it (the broadcast trap, failure class 3, README.md "Design").
// A parameter of shape [n] meets x [N, width] directly; one of shape [n, 1] meets x viewed as
// [N, width, 1]. Either way n must equal width, or one of them must be 1, and the result is
// flattened back to [N, broadcast width].
#pragma once
#include <optional>

#include "core/nn/layer.h"

namespace zero3 {

// The output width of a broadcast layer with parameter shape `shape` on inputs of `width`, or
// nullopt when the shape is not [n] or [n, 1] or does not broadcast against the width.
std::optional<int64_t> broadcast_layer_width(int64_t width, const Shape& shape);

class Scale : public Layer {
 public:
  explicit Scale(const Shape& shape);  // starts at ones
  Parameter& scale() const { return scale_; }
  Var forward(Context& ctx, const Var& x) override;

 private:
  Parameter& scale_;
};

class Bias : public Layer {
 public:
  explicit Bias(const Shape& shape);  // starts at zeros
  Parameter& bias() const { return bias_; }
  Var forward(Context& ctx, const Var& x) override;

 private:
  Parameter& bias_;
};

class RawScale : public Layer {
 public:
  explicit RawScale(const Shape& own_shape);  // registers its own "scale" (ones) and uses it raw
  explicit RawScale(Parameter& other);        // uses another module's parameter raw
  Parameter& target() const { return target_; }
  Var forward(Context& ctx, const Var& x) override;

 private:
  Parameter& target_;
};

}  // namespace zero3
