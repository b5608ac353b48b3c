// element_math.h against libm and the double-precision formulas, over a sweep of the floats.
#include "core/tensor/element_math.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>

namespace zero3 {
namespace {

// Distance in units in the last place between two finite floats of the same sign (0 if equal).
int64_t ulps_apart(float a, float b) {
  const auto ordered = [](float value) {
    const int32_t bits = std::bit_cast<int32_t>(value);
    return bits < 0 ? static_cast<int64_t>(INT32_MIN) - bits : static_cast<int64_t>(bits);
  };
  return std::llabs(ordered(a) - ordered(b));
}

// Every 97th float from 1e-30 to 12 and its negative: both tanh branches, the switch at 0.55,
// the clamp at 9 (about 9 million points).
template <class Visit>
void sweep(Visit visit) {
  const int32_t last = std::bit_cast<int32_t>(12.0f);
  for (int32_t bits = std::bit_cast<int32_t>(1e-30f); bits < last; bits += 97) {
    const float x = std::bit_cast<float>(bits);
    visit(x);
    visit(-x);
  }
}

TEST(ElementMath, TanhIsWithinFourUlpOfLibmEverywhere) {
  int64_t worst = 0;
  float worst_at = 0.0f;
  sweep([&](float x) {
    const int64_t apart = ulps_apart(element_math::tanh(x), std::tanh(x));
    if (apart > worst) worst = apart, worst_at = x;
  });
  EXPECT_LE(worst, 4) << "at x = " << worst_at;
  EXPECT_EQ(element_math::tanh(0.0f), 0.0f);
  EXPECT_EQ(element_math::tanh(10.5f), 1.0f);
  EXPECT_EQ(element_math::tanh(-10.0f), -1.0f);
  EXPECT_EQ(element_math::tanh(-std::numeric_limits<float>::infinity()), -1.0f);
  EXPECT_TRUE(std::isnan(element_math::tanh(std::numeric_limits<float>::quiet_NaN())));
}

TEST(ElementMath, GeluAndItsDerivativeMatchTheDoubleFormula) {
  double worst_value = 0.0, worst_slope = 0.0;
  sweep([&](float x) {
    const double xd = x, inner = 0.7978845608028654 * (xd + 0.044715 * xd * xd * xd), t = std::tanh(inner);
    const double value = 0.5 * xd * (1.0 + t);
    const double slope = 0.5 * (1.0 + t) + 0.5 * xd * (1.0 - t * t) * 0.7978845608028654 * (1.0 + 3 * 0.044715 * xd * xd);
    // Relative to the size of the formula's terms: 0.5 x (1 + t) is of x's size before 1 + t
    // cancels, and the derivative's second term of x (1 + 3 c x^2)'s.
    const double ax = std::abs(xd);
    worst_value = std::max(worst_value, std::abs(element_math::gelu(x) - value) / std::max(std::abs(value), ax));
    worst_slope = std::max(worst_slope, std::abs(element_math::gelu_derivative(x) - slope) /
                                            (1.0 + ax * (1.0 + 3 * 0.044715 * xd * xd)));
  });
  EXPECT_LT(worst_value, 2e-6);
  EXPECT_LT(worst_slope, 2e-6);
}

}  // namespace
}  // namespace zero3
