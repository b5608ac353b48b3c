// The module gradient checker: it passes correct modules and catches a missing gradient.
#include "core/nn/module_gradcheck.h"

#include <gtest/gtest.h>

#include "core/nn/activation.h"
#include "core/nn/broadcast_layers.h"
#include "core/nn/linear.h"
#include "core/nn/sequential.h"

namespace zero3 {
namespace {

TEST(ModuleGradcheck, PassesASequenceOfCorrectLayers) {
  auto layers = std::make_unique<Sequential>();
  layers->append(std::make_unique<Linear>(3, 4, /*has_bias=*/true, 0.5f));
  layers->append(std::make_unique<Activation>(ActivationKind::gelu));
  layers->append(std::make_unique<Scale>(Shape{4}));
  ModuleHarness harness(std::move(layers));
  auto& sequence = harness.root_as<Sequential>();
  const auto result = module_gradcheck([&](Context& ctx, const std::vector<Var>& in) {
    return weighted_sum(ctx, sequence.forward(ctx, in[0]), 2);
  }, {seeded_normal({2, 3}, 1)}, harness.parameters());
  EXPECT_TRUE(result.ok) << result.report;
  EXPECT_EQ(result.wrong, 0);
}

TEST(ModuleGradcheck, FlagsEveryElementOfAParameterWhoseGradientNeverArrives) {
  // A raw use computes with the parameter but records no gradient for it.
  ModuleHarness harness(std::make_unique<RawScale>(Shape{2}));
  harness.parameters()[0]->data = Tensor::from_values({2}, {1.5f, -2.0f});
  auto& raw = harness.root_as<RawScale>();
  const auto result = module_gradcheck([&](Context& ctx, const std::vector<Var>& in) {
    return sum(ctx, raw.forward(ctx, in[0]));
  }, {Tensor::from_values({1, 2}, {3.0f, 4.0f})}, harness.parameters());
  EXPECT_FALSE(result.ok);
  EXPECT_EQ(result.wrong, 2);
  // d/dp sum(x * p) = x: the numeric side sees 3 and 4 where the analytic side has 0.
  EXPECT_NEAR(result.max_abs_diff, 4.0, 1e-2);
  EXPECT_NE(result.report.find("param scale"), std::string::npos) << result.report;
}

TEST(ModuleGradcheck, RefusesParametersWithoutIds) {
  Linear loose(2, 2, /*has_bias=*/true, 0.5f);  // never finalized: every id is -1
  EXPECT_THROW(module_gradcheck([](Context& ctx, const std::vector<Var>& in) { return sum(ctx, in[0]); },
                                {Tensor::zeros({1})}, {&loose.weight(), loose.bias()}),
               std::logic_error);
}

}  // namespace
}  // namespace zero3
