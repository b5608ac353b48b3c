// Linear, TiedLinear and UnusedLinear: values, gradients (zero-sized and size-1 included) and
// which module each parameter use is attributed to.
#include "core/nn/linear.h"

#include <gtest/gtest.h>

#include "core/nn/access_recorder.h"
#include "core/tensor/kernels.h"
#include "core/nn/module_gradcheck.h"
#include "core/nn/residual.h"
#include "core/nn/sequential.h"
#include "core/nn/tied_linear.h"
#include "core/nn/unused_linear.h"

namespace zero3 {
namespace {

GradcheckResult check_layer(ModuleHarness& harness, const Shape& input_shape) {
  auto& layer = harness.root_as<Layer>();
  return module_gradcheck([&](Context& ctx, const std::vector<Var>& in) {
    return weighted_sum(ctx, layer.forward(ctx, in[0]), 11);
  }, {seeded_normal(input_shape, 5)}, harness.parameters());
}

TEST(LinearLayer, ComputesInputTimesWeightTransposedPlusBias) {
  ModuleHarness harness(std::make_unique<Linear>(2, 2, /*has_bias=*/true, 0.5f));
  auto& linear = harness.root_as<Linear>();
  linear.weight().data = Tensor::from_values({2, 2}, {1, 2, 3, 4});
  linear.bias()->data = Tensor::from_values({2}, {10, 20});
  Context ctx(cpu_kernels());
  const Var y = linear.forward(ctx, constant(Tensor::from_values({1, 2}, {1, -1})));
  // Row [1, -1] against weight rows [1, 2] and [3, 4]: -1 + 10 and -1 + 20.
  EXPECT_EQ(y.shape(), (Shape{1, 2}));
  EXPECT_FLOAT_EQ(y.value().data()[0], 9.0f);
  EXPECT_FLOAT_EQ(y.value().data()[1], 19.0f);
}

TEST(LinearLayer, GradientsMatchFiniteDifferences) {
  ModuleHarness harness(std::make_unique<Linear>(3, 2, /*has_bias=*/true, 0.5f));
  const auto result = check_layer(harness, {4, 3});
  EXPECT_TRUE(result.ok) << result.report;
}

TEST(LinearLayer, WithoutBiasOwnsOnlyItsWeightAndItsGradientsMatch) {
  ModuleHarness harness(std::make_unique<Linear>(3, 2, /*has_bias=*/false, 0.5f));
  ASSERT_EQ(harness.parameters().size(), 1u);
  EXPECT_EQ(harness.parameters()[0]->name(), "weight");
  const auto result = check_layer(harness, {4, 3});
  EXPECT_TRUE(result.ok) << result.report;
}

TEST(LinearLayer, SizeOneGradientsMatchFiniteDifferences) {
  ModuleHarness harness(std::make_unique<Linear>(1, 1, /*has_bias=*/true, 0.5f));
  const auto result = check_layer(harness, {1, 1});
  EXPECT_TRUE(result.ok) << result.report;
}

TEST(LinearLayer, ZeroOutputsTakePartAndGetZeroSizedGradients) {
  // concat(x, Linear(8, 0)(x)): the layer's output is empty, yet it lies on the loss's path.
  auto body = std::make_unique<Sequential>();
  body->append(std::make_unique<Linear>(8, 0, /*has_bias=*/true, 0.5f));
  ModuleHarness harness(std::make_unique<Skip>(SkipKind::concat, std::move(body)));
  Parameter& weight = harness.parameter("layers.0.weight");
  EXPECT_EQ(weight.shape(), (Shape{0, 8}));
  Context ctx(cpu_kernels());
  const Var y = harness.root_as<Skip>().forward(ctx, constant(seeded_normal({3, 8}, 2)));
  EXPECT_EQ(y.shape(), (Shape{3, 8}));
  backward(ctx, weighted_sum(ctx, y, 4));
  ASSERT_TRUE(ctx.param_grad(weight).defined());
  EXPECT_EQ(ctx.param_grad(weight).shape(), (Shape{0, 8}));
  ASSERT_TRUE(ctx.param_grad(harness.parameter("layers.0.bias")).defined());
  const auto result = check_layer(harness, {3, 8});
  EXPECT_TRUE(result.ok) << result.report;
}

TEST(LinearLayer, ZeroInputsOutputTheBiasOnEveryRow) {
  ModuleHarness harness(std::make_unique<Linear>(0, 3, /*has_bias=*/true, 0.5f));
  auto& linear = harness.root_as<Linear>();
  linear.bias()->data = Tensor::from_values({3}, {1, 2, 3});
  Context ctx(cpu_kernels());
  const Var y = linear.forward(ctx, constant(Tensor::zeros({2, 0})));
  ASSERT_EQ(y.shape(), (Shape{2, 3}));
  for (int64_t i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(y.value().data()[i], static_cast<float>(i % 3 + 1));
  const auto result = check_layer(harness, {2, 0});
  EXPECT_TRUE(result.ok) << result.report;
}

// Linear(3, 4) followed by TiedLinear on its weight, transposed: 3 -> 4 -> 3.
std::unique_ptr<Sequential> tied_pair(bool tied_bias) {
  auto layers = std::make_unique<Sequential>();
  auto& first = static_cast<Linear&>(layers->append(std::make_unique<Linear>(3, 4, /*has_bias=*/true, 0.5f)));
  layers->append(std::make_unique<TiedLinear>(first.weight(), /*transposed=*/true, tied_bias));
  return layers;
}

TEST(TiedLinear, UsesTheOwnersWeightAsAnExternalParameter) {
  ModuleHarness harness(tied_pair(/*tied_bias=*/false));
  auto& layers = harness.root_as<Sequential>();
  auto& tied = static_cast<TiedLinear&>(layers.at(1));
  EXPECT_TRUE(tied.parameters().empty());
  EXPECT_EQ(harness.parameters().size(), 2u);  // the shared weight is counted once
  AccessRecorder recorder;
  Context ctx(cpu_kernels(), &recorder);
  layers.forward(ctx, constant(seeded_normal({2, 3}, 1)));
  Parameter& weight = harness.parameter("0.weight");
  int tied_uses = 0;
  for (const auto& access : recorder.accesses) {
    if (access.user != &tied) continue;
    ++tied_uses;
    EXPECT_EQ(access.param, &weight);
    EXPECT_NE(access.user, &access.param->owner());
  }
  EXPECT_EQ(tied_uses, 1);
}

TEST(TiedLinear, GradientsOfBothUsesAddUpAndMatchFiniteDifferences) {
  ModuleHarness harness(tied_pair(/*tied_bias=*/true));
  EXPECT_EQ(harness.parameters().size(), 3u);  // shared weight, first bias, tied bias
  const auto result = check_layer(harness, {2, 3});
  EXPECT_TRUE(result.ok) << result.report;
}

TEST(TiedLinear, UntransposedMapsTheOwnersInputWidthToItsOutputWidth) {
  auto layers = std::make_unique<Sequential>();
  auto& first = static_cast<Linear&>(layers->append(std::make_unique<Linear>(3, 3, /*has_bias=*/false, 0.5f)));
  auto& tied = static_cast<TiedLinear&>(layers->append(std::make_unique<TiedLinear>(first.weight(), false, false)));
  EXPECT_EQ(tied.in_features(), 3);
  ModuleHarness harness(std::move(layers));
  const auto result = check_layer(harness, {2, 3});
  EXPECT_TRUE(result.ok) << result.report;
}

TEST(UnusedLinear, IsTheIdentityAndItsParametersGetNoGradient) {
  ModuleHarness harness(std::make_unique<UnusedLinear>(3, 5, /*has_bias=*/true, 0.5f));
  EXPECT_EQ(harness.parameter_count(), 3 * 5 + 5);
  Context ctx(cpu_kernels());
  const Tensor x = seeded_normal({2, 3}, 3);
  const Var y = harness.root_as<UnusedLinear>().forward(ctx, Var(x, /*requires_grad=*/true));
  ASSERT_EQ(y.shape(), x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) EXPECT_EQ(y.value().data()[i], x.data()[i]);
  backward(ctx, weighted_sum(ctx, y, 1));
  for (Parameter* param : harness.parameters()) EXPECT_FALSE(ctx.param_grad(*param).defined()) << param->name();
}

}  // namespace
}  // namespace zero3
