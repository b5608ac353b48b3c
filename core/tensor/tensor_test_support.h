// Helpers shared by tensor-level and op tests: deterministic inputs and closeness checks that count
// wrong elements and print the largest difference.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/tensor/tensor.h"

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

inline Values values_of(const Tensor& t) { return t.to_floats(); }  // either dtype, bf16 widened

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

// One bf16 step (unit in the last place) at 1.0: bf16 keeps 7 explicit mantissa bits.
constexpr float kBf16UlpAtOne = 1.0f / 128.0f;

}  // namespace zero3
