// Helpers shared by the op tests (ops*_test.cc): gradient checks and ShapeError fragment checks, on
// top of the tensor-level helpers (deterministic inputs, closeness checks) in tensor_test_support.h.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "core/base/errors.h"
#include "core/tensor/tensor_test_support.h"
#include "core/autograd/gradcheck.h"
#include "core/autograd/ops.h"

namespace zero3 {

// A weighted sum makes every output element matter differently, so a transposed or misplaced
// gradient cannot pass the way it might under a plain sum.
inline Var weighted_sum(Context& ctx, const Var& v) {
  Values weights(static_cast<size_t>(v.value().numel()));
  for (size_t i = 0; i < weights.size(); ++i) weights[i] = 0.3f * static_cast<float>((i * 5) % 7) - 0.8f;
  return sum(ctx, mul(ctx, v, constant(Tensor::from_values(v.shape(), weights))));
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

}  // namespace zero3
