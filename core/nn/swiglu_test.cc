// SwiGLU: down(silu(gate(x)) * up(x)) value by value, its gradients, and zero widths.
#include "core/nn/swiglu.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/nn/module_gradcheck.h"
#include "core/tensor/kernels.h"

namespace zero3 {
namespace {

GradcheckResult check(ModuleHarness& harness, const Shape& input_shape) {
  auto& block = harness.root_as<SwiGlu>();
  return module_gradcheck([&](Context& ctx, const std::vector<Var>& in) {
    return weighted_sum(ctx, block.forward(ctx, in[0]), 3);
  }, {seeded_normal(input_shape, 8)}, harness.parameters());
}

double silu(double z) { return z / (1.0 + std::exp(-z)); }

TEST(SwiGlu, EachOutputIsDownOfSiluGateTimesUp) {
  ModuleHarness harness(std::make_unique<SwiGlu>(1, 2, /*has_bias=*/false, 1.0f, 1.0f));
  auto& block = harness.root_as<SwiGlu>();
  block.gate().weight().data = Tensor::from_values({2, 1}, {1.5f, -0.5f});
  block.up().weight().data = Tensor::from_values({2, 1}, {2.0f, 3.0f});
  block.down().weight().data = Tensor::from_values({1, 2}, {0.25f, -1.0f});
  Context ctx(cpu_kernels());
  const float x = 0.8f;
  const float y = block.forward(ctx, constant(Tensor::from_values({1, 1}, {x}))).value().data()[0];
  const double expected = 0.25 * silu(1.5 * x) * (2.0 * x) - 1.0 * silu(-0.5 * x) * (3.0 * x);
  EXPECT_NEAR(y, expected, 1e-6);
}

TEST(SwiGlu, GradientsMatchFiniteDifferencesWithAndWithoutBias) {
  for (const bool has_bias : {false, true}) {
    ModuleHarness harness(std::make_unique<SwiGlu>(4, 3, has_bias, 0.5f, 0.5f));
    EXPECT_EQ(harness.parameters().size(), has_bias ? 6u : 3u);
    const auto result = check(harness, {2, 4});
    EXPECT_TRUE(result.ok) << "bias " << has_bias << ": " << result.report;
  }
}

// A zero hidden width gives [0, C] and [C, 0] weights: the block outputs zeros and every
// gradient that exists is a zero-sized or zero tensor, never a shape error.
TEST(SwiGlu, ZeroHiddenWidthOutputsZerosAndItsGradientsCheck) {
  ModuleHarness harness(std::make_unique<SwiGlu>(3, 0, /*has_bias=*/true, 0.5f, 0.5f));
  Context ctx(cpu_kernels());
  const Var y = harness.root_as<SwiGlu>().forward(ctx, constant(seeded_normal({2, 3}, 4)));
  ASSERT_EQ(y.shape(), (Shape{2, 3}));
  for (int64_t i = 0; i < y.value().numel(); ++i) EXPECT_EQ(y.value().data()[i], 0.0f);
  const auto result = check(harness, {2, 3});
  EXPECT_TRUE(result.ok) << result.report;
}

}  // namespace
}  // namespace zero3
