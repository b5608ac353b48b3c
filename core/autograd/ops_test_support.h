// Helpers shared by the op tests (ops*_test.cc): deterministic inputs, closeness checks that
// count wrong elements, gradient checks and ShapeError fragment checks.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "core/base/errors.h"
#include "core/autograd/gradcheck.h"
#include "core/autograd/ops.h"

namespace zero3 {

using Values = std::vector<float>;

// Deterministic values from the element index: multiples of 0.1 offset by 0.05 times `spread`, so
// none lies within a gradcheck step of 0 (relu's kink) and neighbours differ.
inline Tensor ramp(const Shape& shape, float spread = 1.0f, int64_t seed = 0) {
  Values values(static_cast<size_t>(shape_numel(shape)));
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = spread * (0.1f * static_cast<float>((static_cast<int64_t>(i) * 7 + seed * 3) % 9 - 4) + 0.05f);
  }
  return Tensor::from_values(shape, values);
}

// A weighted sum makes every output element matter differently, so a transposed or misplaced
// gradient cannot pass the way it might under a plain sum.
inline Var weighted_sum(Context& ctx, const Var& v) {
  Values weights(static_cast<size_t>(v.value().numel()));
  for (size_t i = 0; i < weights.size(); ++i) weights[i] = 0.3f * static_cast<float>((i * 5) % 7) - 0.8f;
  return sum(ctx, mul(ctx, v, constant(Tensor::from_values(v.shape(), weights))));
}

inline Values values_of(const Tensor& t) { return Values(t.values().begin(), t.values().end()); }

inline void expect_close(const Tensor& got, const Values& expected, float tolerance = 1e-5f) {
  ASSERT_EQ(got.numel(), static_cast<int64_t>(expected.size())) << describe(got);
  float max_diff = 0.0f;
  int wrong = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    const float diff = std::abs(got.data()[i] - expected[i]);
    max_diff = std::max(max_diff, diff);
    if (!(diff <= tolerance)) {
      if (wrong++ < 4) ADD_FAILURE() << "element " << i << ": got " << got.data()[i] << " want " << expected[i];
    }
  }
  EXPECT_EQ(wrong, 0) << "#wrong=" << wrong << " max_diff=" << max_diff;
}

inline void expect_gradients_match(const GradcheckLoss& loss, const std::vector<Tensor>& inputs,
                                   const GradcheckOptions& options = {}) {
  const GradcheckResult result = gradcheck(loss, inputs, options);
  EXPECT_TRUE(result.ok) << result.report;
}

// Runs `body` and checks it raises a ShapeError whose message contains every fragment.
inline void expect_shape_error(const std::function<void()>& body, const std::vector<std::string>& fragments) {
  try {
    body();
    ADD_FAILURE() << "expected a ShapeError mentioning " << fragments[0];
  } catch (const ShapeError& error) {
    const std::string message = error.what();
    for (const std::string& fragment : fragments) EXPECT_NE(message.find(fragment), std::string::npos) << message;
  }
}

inline Var leaf(const Tensor& value) { return Var(value, /*requires_grad=*/true); }

// One bf16 step (unit in the last place) at 1.0: bf16 keeps 7 explicit mantissa bits.
constexpr float kBf16UlpAtOne = 1.0f / 128.0f;

}  // namespace zero3
