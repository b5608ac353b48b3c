// Activation layers: GELU and ReLU values and gradients.
#include "core/nn/activation.h"

#include <gtest/gtest.h>

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

TEST(Activation, ReluGradientsMatchFiniteDifferences) {
  const auto result = check(ActivationKind::relu);
  EXPECT_TRUE(result.ok) << result.report;
}

}  // namespace
}  // namespace zero3
