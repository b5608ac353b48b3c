// LayerNorm: normalised values and gradients, including the degenerate width 1.
#include "core/nn/layer_norm.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/base/math_bugs.h"

#include "core/tensor/kernels.h"
#include "core/nn/module_gradcheck.h"

namespace zero3 {
namespace {

GradcheckResult check(ModuleHarness& harness, const Shape& input_shape) {
  auto& norm = harness.root_as<LayerNorm>();
  return module_gradcheck([&](Context& ctx, const std::vector<Var>& in) {
    return weighted_sum(ctx, norm.forward(ctx, in[0]), 3);
  }, {seeded_normal(input_shape, 8)}, harness.parameters());
}

TEST(LayerNormLayer, StartsAsPlainNormalisation) {
  ModuleHarness harness(std::make_unique<LayerNorm>(2));
  Context ctx(cpu_kernels());
  const Var y = harness.root_as<LayerNorm>().forward(ctx, constant(Tensor::from_values({1, 2}, {1, 3})));
  // Mean 2, variance 1: the row normalises to [-1, 1] (up to eps).
  EXPECT_NEAR(y.value().data()[0], -1.0f, 1e-4f);
  EXPECT_NEAR(y.value().data()[1], 1.0f, 1e-4f);
}

TEST(LayerNormLayer, GradientsMatchFiniteDifferences) {
  ModuleHarness harness(std::make_unique<LayerNorm>(5));
  // Away from the initial ones and zeros, so the gain and bias gradients are exercised fully.
  harness.parameters()[0]->data = seeded_normal({5}, 21);
  harness.parameters()[1]->data = seeded_normal({5}, 22);
  const auto result = check(harness, {3, 5});
  EXPECT_TRUE(result.ok) << result.report;
}

// Math bug layer_norm_eps_1e3 (core/base/math_bugs.h): a row of variance 1 normalises to
// +-1 / sqrt(1 + eps), eps 1e-3 under the bug and 1e-5 once its scope ends.
TEST(LayerNormMathBugs, Eps1e3ShrinksTheNormalisedRowAndItsGradientsStayConsistent) {
  ModuleHarness harness(std::make_unique<LayerNorm>(2));
  const auto normalised = [&] {
    Context ctx(cpu_kernels());
    return harness.root_as<LayerNorm>().forward(ctx, constant(Tensor::from_values({1, 2}, {1, 3}))).value().data()[1];
  };
  {
    const ScopedMathBug bug(MathBug::layer_norm_eps_1e3);
    EXPECT_NEAR(normalised(), 1.0 / std::sqrt(1.0 + 1e-3), 1e-6);
    const auto result = check(harness, {3, 2});
    EXPECT_TRUE(result.ok) << result.report;
  }
  EXPECT_NEAR(normalised(), 1.0 / std::sqrt(1.0 + 1e-5), 1e-6);
}

TEST(LayerNormLayer, WidthOneGradientsMatchFiniteDifferences) {
  ModuleHarness harness(std::make_unique<LayerNorm>(1));
  const auto result = check(harness, {3, 1});
  EXPECT_TRUE(result.ok) << result.report;
}

}  // namespace
}  // namespace zero3
