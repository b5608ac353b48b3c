// Mixture of experts: data-dependent routing, experts without rows not invoked, outputs scaled by
// the gate probability, gradients through the gate and the experts.
#include "core/nn/moe.h"

#include <cmath>
#include <set>

#include <gtest/gtest.h>

#include "core/base/errors.h"
#include "core/tensor/kernels.h"
#include "core/nn/module_gradcheck.h"

namespace zero3 {
namespace {

// Two experts on width 2 with a gate that sends rows with x0 > 0 to expert 0, the rest to expert 1,
// by a wide margin (so finite differences never flip a row's expert).
std::unique_ptr<ModuleHarness> two_expert_moe() {
  auto harness = std::make_unique<ModuleHarness>(std::make_unique<Moe>(2, 2, 3, 0.5f));
  auto& moe = harness->root_as<Moe>();
  moe.gate().weight().data = Tensor::from_values({2, 2}, {1.0f, 0.2f, -1.0f, 0.1f});
  moe.gate().bias()->data = Tensor::from_values({2}, {0.1f, -0.1f});
  return harness;
}

const Tensor kPositiveRows = Tensor::from_values({2, 2}, {1.0f, 0.3f, 2.0f, -0.5f});
const Tensor kNegativeRows = Tensor::from_values({2, 2}, {-1.0f, 0.2f, -0.5f, 1.0f});

// The modules entered on ctx's tape, by name.
std::set<std::string> entered(Context& ctx) {
  std::set<std::string> names;
  for (const TapeEntry& entry : ctx.tape().entries()) {
    if (entry.is_marker && entry.marker.kind == MarkerKind::module_enter) names.insert(entry.marker.module->name());
  }
  return names;
}

std::set<std::string> experts_run(Moe& moe, const Tensor& x) {
  Context ctx(cpu_kernels());
  moe.forward(ctx, constant(x));
  std::set<std::string> experts;
  for (const std::string& name : entered(ctx)) {
    if (name.starts_with("experts.") && name.find('.', 8) == std::string::npos) experts.insert(name);
  }
  return experts;
}

TEST(Moe, DifferentDataRunsDifferentExpertsAndSkipsExpertsWithoutRows) {
  auto harness = two_expert_moe();
  auto& moe = harness->root_as<Moe>();
  EXPECT_EQ(experts_run(moe, kPositiveRows), (std::set<std::string>{"experts.0"}));
  EXPECT_EQ(experts_run(moe, kNegativeRows), (std::set<std::string>{"experts.1"}));
}

TEST(Moe, EachRowIsItsExpertsOutputScaledByTheGateProbability) {
  auto harness = two_expert_moe();
  auto& moe = harness->root_as<Moe>();
  const Tensor x = Tensor::from_values({2, 2}, {1.0f, 0.3f, -0.5f, 1.0f});
  Context ctx(cpu_kernels());
  const Tensor y = moe.forward(ctx, constant(x)).value();
  const Tensor logits = moe.gate().forward(ctx, constant(x)).value();
  for (int64_t row = 0; row < 2; ++row) {
    const float l0 = logits.data()[row * 2];
    const float l1 = logits.data()[row * 2 + 1];
    const int64_t chosen = l0 >= l1 ? 0 : 1;
    const double p = 1.0 / (1.0 + std::exp(static_cast<double>(chosen == 0 ? l1 - l0 : l0 - l1)));
    const Tensor row_x = Tensor::from_values({1, 2}, {x.data()[row * 2], x.data()[row * 2 + 1]});
    const Tensor expert_y = moe.expert(chosen).forward(ctx, constant(row_x)).value();
    for (int64_t c = 0; c < 2; ++c) {
      EXPECT_NEAR(y.data()[row * 2 + c], p * expert_y.data()[c], 1e-5) << "row " << row << " col " << c;
    }
  }
}

TEST(Moe, GradientsThroughGateAndExpertsMatchFiniteDifferences) {
  auto harness = two_expert_moe();
  auto& moe = harness->root_as<Moe>();
  const Tensor x = Tensor::from_values({4, 2}, {1.0f, 0.3f, -1.0f, 0.2f, 2.0f, -0.5f, -0.5f, 1.0f});
  const auto result = module_gradcheck([&](Context& ctx, const std::vector<Var>& in) {
    return weighted_sum(ctx, moe.forward(ctx, in[0]), 12);
  }, {x}, harness->parameters());
  EXPECT_TRUE(result.ok) << result.report;
}

TEST(Moe, MetaForwardIsRejectedBecauseRoutingNeedsValues) {
  auto harness = two_expert_moe();
  Context ctx(cpu_kernels());
  EXPECT_THROW(harness->root_as<Moe>().forward(ctx, constant(Tensor::meta({2, 2}))), InputError);
}

}  // namespace
}  // namespace zero3
