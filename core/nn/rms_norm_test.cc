// RMSNorm: normalised values (no mean subtracted, no bias) and gradients, width 1 included.
#include "core/nn/rms_norm.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/base/math_bugs.h"
#include "core/nn/module_gradcheck.h"
#include "core/tensor/kernels.h"

namespace zero3 {
namespace {

GradcheckResult check(ModuleHarness& harness, const Shape& input_shape) {
  auto& norm = harness.root_as<RmsNorm>();
  return module_gradcheck([&](Context& ctx, const std::vector<Var>& in) {
    return weighted_sum(ctx, norm.forward(ctx, in[0]), 3);
  }, {seeded_normal(input_shape, 8)}, harness.parameters());
}

float normalised_at(RmsNorm& norm, int index) {
  Context ctx(cpu_kernels());
  return norm.forward(ctx, constant(Tensor::from_values({1, 2}, {1, 3}))).value().data()[index];
}

TEST(RmsNormLayer, DividesByTheRootMeanSquareWithoutSubtractingTheMean) {
  ModuleHarness harness(std::make_unique<RmsNorm>(2));
  auto& norm = harness.root_as<RmsNorm>();
  // Mean square (1 + 9) / 2 = 5: [1, 3] / sqrt(5 + 1e-5). A LayerNorm would give [-1, 1].
  EXPECT_NEAR(normalised_at(norm, 0), 1.0 / std::sqrt(5.0 + 1e-5), 1e-6);
  EXPECT_NEAR(normalised_at(norm, 1), 3.0 / std::sqrt(5.0 + 1e-5), 1e-6);
  // The gain multiplies each feature.
  harness.parameters()[0]->data = Tensor::from_values({2}, {2, -1});
  EXPECT_NEAR(normalised_at(norm, 1), -3.0 / std::sqrt(5.0 + 1e-5), 1e-6);
}

TEST(RmsNormLayer, GradientsMatchFiniteDifferences) {
  ModuleHarness harness(std::make_unique<RmsNorm>(5));
  harness.parameters()[0]->data = seeded_normal({5}, 21);  // away from the initial ones
  const auto result = check(harness, {3, 5});
  EXPECT_TRUE(result.ok) << result.report;
}

TEST(RmsNormLayer, WidthOneGradientsMatchFiniteDifferences) {
  ModuleHarness harness(std::make_unique<RmsNorm>(1));
  const auto result = check(harness, {3, 1});
  EXPECT_TRUE(result.ok) << result.report;
}

// Math bug rms_norm_eps_1e3 (core/base/math_bugs.h): eps 1e-3 under the bug, 1e-5 once its scope ends.
TEST(RmsNormMathBugs, Eps1e3ShrinksTheNormalisedRowAndItsGradientsStayConsistent) {
  ModuleHarness harness(std::make_unique<RmsNorm>(2));
  auto& norm = harness.root_as<RmsNorm>();
  {
    const ScopedMathBug bug(MathBug::rms_norm_eps_1e3);
    EXPECT_NEAR(normalised_at(norm, 1), 3.0 / std::sqrt(5.0 + 1e-3), 1e-6);
    const auto result = check(harness, {3, 2});
    EXPECT_TRUE(result.ok) << result.report;
  }
  EXPECT_NEAR(normalised_at(norm, 1), 3.0 / std::sqrt(5.0 + 1e-5), 1e-6);
}

}  // namespace
}  // namespace zero3
