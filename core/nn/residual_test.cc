// Skip connections: residual, concat and sum_residual, including zero-width bodies.
#include "core/nn/residual.h"

#include <gtest/gtest.h>

#include "core/tensor/kernels.h"
#include "core/nn/linear.h"
#include "core/nn/module_gradcheck.h"

namespace zero3 {
namespace {

std::unique_ptr<ModuleHarness> skip_over_linear(SkipKind kind, int64_t width, int64_t out) {
  auto body = std::make_unique<Sequential>();
  body->append(std::make_unique<Linear>(width, out, /*has_bias=*/true, 0.5f));
  return std::make_unique<ModuleHarness>(std::make_unique<Skip>(kind, std::move(body)));
}

GradcheckResult check(ModuleHarness& harness, const Shape& input_shape) {
  auto& skip = harness.root_as<Skip>();
  return module_gradcheck([&](Context& ctx, const std::vector<Var>& in) {
    return weighted_sum(ctx, skip.forward(ctx, in[0]), 7);
  }, {seeded_normal(input_shape, 3)}, harness.parameters());
}

// Body: Linear without input, so body(x) is its bias on every row.
Tensor forward_with_bias(SkipKind kind, const Tensor& x, const std::vector<float>& bias) {
  auto harness = skip_over_linear(kind, x.dim(1), static_cast<int64_t>(bias.size()));
  auto& linear = static_cast<Linear&>(harness->root_as<Skip>().body().at(0));
  linear.weight().data = Tensor::zeros(linear.weight().shape());
  linear.bias()->data = Tensor::from_values({static_cast<int64_t>(bias.size())}, bias);
  Context ctx(cpu_kernels());
  return harness->root_as<Skip>().forward(ctx, constant(x)).value();
}

TEST(Skip, ResidualAddsTheBodyToItsInput) {
  const Tensor y = forward_with_bias(SkipKind::residual, Tensor::from_values({1, 2}, {1, 2}), {10, 20});
  EXPECT_EQ(std::vector<float>(y.values().begin(), y.values().end()), (std::vector<float>{11, 22}));
}

TEST(Skip, ConcatAppendsTheBodyAfterItsInput) {
  const Tensor y = forward_with_bias(SkipKind::concat, Tensor::from_values({1, 2}, {1, 2}), {7});
  EXPECT_EQ(std::vector<float>(y.values().begin(), y.values().end()), (std::vector<float>{1, 2, 7}));
}

TEST(Skip, SumResidualAddsEachRowsBodySumToThatRowOnly) {
  const Tensor y = forward_with_bias(SkipKind::sum_residual, Tensor::from_values({2, 2}, {1, 2, 3, 4}), {10, 20, 30});
  EXPECT_EQ(std::vector<float>(y.values().begin(), y.values().end()), (std::vector<float>{61, 62, 63, 64}));
}

TEST(Skip, ResidualGradientsMatchFiniteDifferences) {
  auto harness = skip_over_linear(SkipKind::residual, 3, 3);
  const auto result = check(*harness, {2, 3});
  EXPECT_TRUE(result.ok) << result.report;
}

TEST(Skip, ConcatOfAZeroWidthBodyGradientsMatchFiniteDifferences) {
  auto harness = skip_over_linear(SkipKind::concat, 3, 0);
  const auto result = check(*harness, {2, 3});
  EXPECT_TRUE(result.ok) << result.report;
}

TEST(Skip, SumResidualGradientsMatchFiniteDifferencesForZeroAndNonZeroWidths) {
  for (int64_t out : {0, 1, 4}) {
    auto harness = skip_over_linear(SkipKind::sum_residual, 3, out);
    const auto result = check(*harness, {2, 3});
    EXPECT_TRUE(result.ok) << "body width " << out << ": " << result.report;
  }
}

}  // namespace
}  // namespace zero3
