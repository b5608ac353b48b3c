// Parameters in broadcasting elementwise ops: checked uses ([d], [d,1], [1], [0] against [B,1])
// and raw uses, where a placeholder silently changes the result (the broadcast trap).
#include "core/nn/broadcast_layers.h"

#include <gtest/gtest.h>

#include "core/tensor/kernels.h"
#include "core/nn/module_gradcheck.h"

namespace zero3 {
namespace {

GradcheckResult check_layer(ModuleHarness& harness, const Shape& input_shape) {
  auto& layer = harness.root_as<Layer>();
  // Parameters away from their ones/zeros start, so every broadcast gradient is distinct.
  for (Parameter* param : harness.parameters()) param->data = seeded_normal(param->shape(), 40 + param->id());
  return module_gradcheck([&](Context& ctx, const std::vector<Var>& in) {
    return weighted_sum(ctx, layer.forward(ctx, in[0]), 8);
  }, {seeded_normal(input_shape, 2)}, harness.parameters());
}

// Raw handles show a fixed placeholder, as an engine does while the parameter is partitioned.
class PlaceholderHooks : public ModuleHooks {
 public:
  explicit PlaceholderHooks(Tensor placeholder) : placeholder_(std::move(placeholder)) {}
  Tensor raw_access(Context&, Parameter&) override { return placeholder_; }

 private:
  Tensor placeholder_;
};

TEST(BroadcastLayerWidth, FollowsBroadcastingForShapesNAndNByOne) {
  EXPECT_EQ(broadcast_layer_width(8, {8}), 8);
  EXPECT_EQ(broadcast_layer_width(8, {1}), 8);
  EXPECT_EQ(broadcast_layer_width(1, {4}), 4);
  EXPECT_EQ(broadcast_layer_width(8, {8, 1}), 8);
  EXPECT_EQ(broadcast_layer_width(1, {0}), 0);
  EXPECT_EQ(broadcast_layer_width(0, {1}), 0);
  EXPECT_EQ(broadcast_layer_width(8, {3}), std::nullopt);
  EXPECT_EQ(broadcast_layer_width(8, {8, 2}), std::nullopt);
  EXPECT_EQ(broadcast_layer_width(8, {}), std::nullopt);
  EXPECT_EQ(broadcast_layer_width(8, {1, 1, 1}), std::nullopt);
}

TEST(ScaleLayer, NByOneScalesEachFeature) {
  ModuleHarness harness(std::make_unique<Scale>(Shape{3, 1}));
  harness.root_as<Scale>().scale().data = Tensor::from_values({3, 1}, {2, 3, 4});
  Context ctx(cpu_kernels());
  const Var y = harness.root_as<Scale>().forward(ctx, constant(Tensor::from_values({1, 3}, {1, 2, 3})));
  ASSERT_EQ(y.shape(), (Shape{1, 3}));
  EXPECT_EQ(std::vector<float>(y.value().values().begin(), y.value().values().end()), (std::vector<float>{2, 6, 12}));
}

TEST(ScaleLayer, GradientsMatchFiniteDifferencesForEveryBroadcastShape) {
  const std::vector<std::pair<Shape, int64_t>> cases = {{{3}, 3}, {{3, 1}, 3}, {{1}, 3}, {{4}, 1}, {{1, 1}, 3}};
  for (const auto& [shape, width] : cases) {
    ModuleHarness harness(std::make_unique<Scale>(shape));
    const auto result = check_layer(harness, {2, width});
    EXPECT_TRUE(result.ok) << "scale " << shape_str(shape) << " on width " << width << ": " << result.report;
  }
}

TEST(BiasLayer, GradientsMatchFiniteDifferencesForEveryBroadcastShape) {
  const std::vector<std::pair<Shape, int64_t>> cases = {{{3}, 3}, {{1}, 3}, {{3, 1}, 3}, {{4}, 1}};
  for (const auto& [shape, width] : cases) {
    ModuleHarness harness(std::make_unique<Bias>(shape));
    const auto result = check_layer(harness, {2, width});
    EXPECT_TRUE(result.ok) << "bias " << shape_str(shape) << " on width " << width << ": " << result.report;
  }
}

TEST(BiasLayer, ZeroSizedBiasAgainstWidthOneGivesZeroWidthAndAZeroSizedGradient) {
  ModuleHarness harness(std::make_unique<Bias>(Shape{0}));
  Context ctx(cpu_kernels());
  const Var y = harness.root_as<Bias>().forward(ctx, constant(seeded_normal({4, 1}, 1)));
  EXPECT_EQ(y.shape(), (Shape{4, 0}));
  backward(ctx, sum(ctx, y));
  const Tensor grad = ctx.param_grad(harness.root_as<Bias>().bias());
  ASSERT_TRUE(grad.defined());
  EXPECT_EQ(grad.shape(), (Shape{0}));
}

TEST(RawScale, WithTheFullValueComputesLikeScaleButCarriesNoGradient) {
  ModuleHarness harness(std::make_unique<RawScale>(Shape{3}));
  harness.root_as<RawScale>().target().data = Tensor::from_values({3}, {2, 3, 4});
  Context ctx(cpu_kernels());
  const Var y = harness.root_as<RawScale>().forward(ctx, constant(Tensor::from_values({1, 3}, {1, 2, 3})));
  EXPECT_EQ(std::vector<float>(y.value().values().begin(), y.value().values().end()), (std::vector<float>{2, 6, 12}));
  backward(ctx, sum(ctx, y));
  EXPECT_FALSE(ctx.param_grad(harness.root_as<RawScale>().target()).defined());
}

TEST(RawScale, InputGradientsMatchFiniteDifferences) {
  ModuleHarness harness(std::make_unique<RawScale>(Shape{3, 1}));
  const auto result = module_gradcheck([&](Context& c, const std::vector<Var>& in) {
    return weighted_sum(c, harness.root_as<RawScale>().forward(c, in[0]), 1);
  }, {seeded_normal({2, 3}, 1)}, {});
  EXPECT_TRUE(result.ok) << result.report;
}

TEST(RawScale, AnEmptyPlaceholderSilentlyBroadcastsWidthOneToZero) {
  ModuleHarness harness(std::make_unique<RawScale>(Shape{4}));
  PlaceholderHooks hooks(Tensor::zeros({0}));
  Context ctx(cpu_kernels(), &hooks);
  const Var y = harness.root_as<RawScale>().forward(ctx, constant(seeded_normal({5, 1}, 1)));
  EXPECT_EQ(y.shape(), (Shape{5, 0}));  // the real parameter gives [5, 4]
  EXPECT_EQ(sum(ctx, y).value().item(), 0.0f);
}

TEST(RawScale, AScalarPlaceholderSilentlyPassesTheInputThrough) {
  ModuleHarness harness(std::make_unique<RawScale>(Shape{4}));
  PlaceholderHooks hooks(Tensor::from_values({1}, {1.0f}));
  Context ctx(cpu_kernels(), &hooks);
  const Tensor x = seeded_normal({5, 1}, 1);
  const Var y = harness.root_as<RawScale>().forward(ctx, constant(x));
  ASSERT_EQ(y.shape(), (Shape{5, 1}));
  for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(y.value().data()[i], x.data()[i]);
}

}  // namespace
}  // namespace zero3
