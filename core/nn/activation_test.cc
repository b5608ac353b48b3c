// Activation layers: GELU and ReLU values and gradients.
#include "core/nn/activation.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/base/math_bugs.h"

#include "core/tensor/kernels.h"
#include "core/nn/module_gradcheck.h"

namespace zero3 {
namespace {

// Away from ReLU's kink at 0, so central differences are exact there.
const Tensor kInputs = Tensor::from_values({2, 3}, {-1.5f, -0.3f, 0.2f, 0.7f, 1.1f, -2.0f});

GradcheckResult check(ActivationKind kind) {
  ModuleHarness harness(std::make_unique<Activation>(kind));
  auto& act = harness.root_as<Activation>();
  return module_gradcheck([&](Context& ctx, const std::vector<Var>& in) {
    return weighted_sum(ctx, act.forward(ctx, in[0]), 4);
  }, {kInputs}, harness.parameters());
}

TEST(Activation, ReluZeroesNegativesAndKeepsPositives) {
  Activation relu_layer(ActivationKind::relu);
  Context ctx(cpu_kernels());
  const Var y = relu_layer.forward(ctx, constant(kInputs));
  EXPECT_EQ(std::vector<float>(y.value().values().begin(), y.value().values().end()),
            (std::vector<float>{0, 0, 0.2f, 0.7f, 1.1f, 0}));
}

TEST(Activation, GeluGradientsMatchFiniteDifferences) {
  const auto result = check(ActivationKind::gelu);
  EXPECT_TRUE(result.ok) << result.report;
}

// Math bug gelu_exact_instead_of_tanh (core/base/math_bugs.h): the erf GELU in forward, its own
// derivative in backward, and the tanh approximation back once the scope ends.
TEST(ActivationMathBugs, ExactGeluReplacesTheTanhApproximationInForwardAndBackward) {
  Activation gelu_layer(ActivationKind::gelu);
  const auto forward = [&] {
    Context ctx(cpu_kernels());
    const Tensor y = gelu_layer.forward(ctx, constant(kInputs)).value();
    return std::vector<float>(y.values().begin(), y.values().end());
  };
  const std::vector<float> tanh_values = forward();
  std::vector<float> erf_values;
  {
    const ScopedMathBug bug(MathBug::gelu_exact_instead_of_tanh);
    erf_values = forward();
    const auto result = check(ActivationKind::gelu);
    EXPECT_TRUE(result.ok) << result.report;
  }
  float largest_change = 0.0f;
  for (size_t i = 0; i < erf_values.size(); ++i) {
    const double x = kInputs.values()[i];
    EXPECT_NEAR(erf_values[i], 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))), 1e-6) << "x=" << x;
    largest_change = std::max(largest_change, std::abs(erf_values[i] - tanh_values[i]));
  }
  // The two GELUs differ by up to 4.7e-4 (at |x| = 2.7): far above f32 rounding, so the fuzz sees it.
  EXPECT_GT(largest_change, 1e-4f);
  EXPECT_EQ(forward(), tanh_values);
}

TEST(Activation, ReluGradientsMatchFiniteDifferences) {
  const auto result = check(ActivationKind::relu);
  EXPECT_TRUE(result.ok) << result.report;
}

}  // namespace
}  // namespace zero3
