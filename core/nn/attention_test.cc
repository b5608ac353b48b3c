// The transformer pieces: causal self-attention, the MLP block and the pre-norm block.
#include "core/nn/attention.h"

#include <gtest/gtest.h>

#include "core/base/errors.h"
#include "core/base/math_bugs.h"
#include "core/tensor/kernels.h"
#include "core/nn/mlp.h"
#include "core/nn/module_gradcheck.h"
#include "core/nn/transformer.h"

namespace zero3 {
namespace {

GradcheckResult check_layer(ModuleHarness& harness, const Shape& input_shape) {
  auto& layer = harness.root_as<Layer>();
  return module_gradcheck([&](Context& ctx, const std::vector<Var>& in) {
    return weighted_sum(ctx, layer.forward(ctx, in[0]), 6);
  }, {seeded_normal(input_shape, 9)}, harness.parameters());
}

TEST(AttentionBlock, GradientsMatchFiniteDifferences) {
  ModuleHarness harness(std::make_unique<CausalSelfAttention>(4, 2, 0.5f, 0.5f));
  const auto result = check_layer(harness, {2, 3, 4});
  EXPECT_TRUE(result.ok) << result.report;
}

TEST(AttentionBlock, SingleHeadSingleStepGradientsMatchFiniteDifferences) {
  ModuleHarness harness(std::make_unique<CausalSelfAttention>(2, 1, 0.5f, 0.5f));
  const auto result = check_layer(harness, {1, 1, 2});
  EXPECT_TRUE(result.ok) << result.report;
}

TEST(AttentionBlock, EarlierPositionsIgnoreLaterOnes) {
  ModuleHarness harness(std::make_unique<CausalSelfAttention>(4, 2, 0.5f, 0.5f));
  auto& attn = harness.root_as<CausalSelfAttention>();
  Tensor x = seeded_normal({1, 3, 4}, 1);
  Context ctx(cpu_kernels());
  const Tensor before = attn.forward(ctx, constant(x)).value().clone();
  for (int64_t c = 0; c < 4; ++c) x.data()[2 * 4 + c] += 5.0f;  // change only the last position
  const Tensor after = attn.forward(ctx, constant(x)).value();
  for (int64_t i = 0; i < 2 * 4; ++i) EXPECT_EQ(before.data()[i], after.data()[i]) << "element " << i;
  EXPECT_NE(before.data()[2 * 4], after.data()[2 * 4]);
}

// A sequential token model's attention: rows [B*T, C] give what [B, T, C] gives, row for row.
TEST(AttentionBlock, TokenRowsAttendAsTheirSequences) {
  ModuleHarness sequences(std::make_unique<CausalSelfAttention>(4, 2, 0.5f, 0.5f), 3);
  ModuleHarness rows(std::make_unique<CausalSelfAttention>(4, 2, 0.5f, 0.5f,
                                                           AttentionOptions{.rows_per_sequence = 3}), 3);
  const Tensor x = seeded_normal({2, 3, 4}, 1);
  Context ctx(cpu_kernels());
  const Tensor expected = sequences.root_as<Layer>().forward(ctx, constant(x)).value().clone();
  const Tensor got = rows.root_as<Layer>().forward(ctx, constant(x.reshape({6, 4}))).value();
  ASSERT_EQ(got.shape(), (Shape{6, 4}));
  for (int64_t i = 0; i < 24; ++i) EXPECT_EQ(got.data()[i], expected.data()[i]) << "element " << i;
}

TEST(AttentionBlock, TokenRowsGradientsMatchFiniteDifferencesWithAndWithoutBiases) {
  for (const bool bias : {true, false}) {
    ModuleHarness harness(std::make_unique<CausalSelfAttention>(
        4, 2, 0.5f, 0.5f, AttentionOptions{.qkv_bias = bias, .proj_bias = !bias, .rows_per_sequence = 3}));
    EXPECT_EQ(harness.parameters().size(), 3u) << "qkv and proj weights and one bias";
    const auto result = check_layer(harness, {6, 4});
    EXPECT_TRUE(result.ok) << result.report;
  }
}

TEST(AttentionBlock, ZeroWidthTokenRowsGiveZeroWidthRows) {
  ModuleHarness harness(std::make_unique<CausalSelfAttention>(0, 3, 0.5f, 0.5f, AttentionOptions{.rows_per_sequence = 2}));
  Context ctx(cpu_kernels());
  const Var y = harness.root_as<Layer>().forward(ctx, constant(seeded_normal({4, 0}, 1)));
  EXPECT_EQ(y.shape(), (Shape{4, 0}));
}

TEST(AttentionBlock, RowsThatAreNotWholeSequencesAreAShapeError) {
  ModuleHarness harness(std::make_unique<CausalSelfAttention>(4, 2, 0.5f, 0.5f, AttentionOptions{.rows_per_sequence = 3}));
  Context ctx(cpu_kernels());
  EXPECT_THROW(harness.root_as<Layer>().forward(ctx, constant(seeded_normal({5, 4}, 1))), ShapeError);
}

// The planted shared-math bugs (core/base/math_bugs.h) change exactly what they say, and only in scope.
TEST(AttentionBlock, LeakingMaskLetsAPositionSeeTheNextToken) {
  ModuleHarness harness(std::make_unique<CausalSelfAttention>(4, 2, 0.5f, 0.5f));
  auto& attn = harness.root_as<CausalSelfAttention>();
  Tensor x = seeded_normal({1, 3, 4}, 1);
  Context ctx(cpu_kernels());
  const auto first_position_moves = [&] {
    const Tensor before = attn.forward(ctx, constant(x)).value().clone();
    Tensor changed = x.clone();
    for (int64_t c = 0; c < 4; ++c) changed.data()[1 * 4 + c] += 5.0f;  // only position 1
    const Tensor after = attn.forward(ctx, constant(changed)).value();
    return before.data()[0] != after.data()[0];
  };
  EXPECT_FALSE(first_position_moves());
  {
    const ScopedMathBug leak(MathBug::causal_mask_leaks_next_token);
    EXPECT_TRUE(first_position_moves()) << "position 0 must see position 1 with the leak";
  }
  EXPECT_FALSE(first_position_moves());
}

TEST(AttentionBlock, ValuesReadAtTheKeysOffsetInBackwardFailGradcheck) {
  ModuleHarness harness(std::make_unique<CausalSelfAttention>(4, 2, 0.5f, 0.5f));
  {
    const ScopedMathBug slip(MathBug::attention_backward_value_at_key);
    EXPECT_FALSE(check_layer(harness, {2, 3, 4}).ok) << "the value gradient must be wrong";
  }
  EXPECT_TRUE(check_layer(harness, {2, 3, 4}).ok);
}

TEST(Mlp, GradientsMatchFiniteDifferences) {
  ModuleHarness harness(std::make_unique<Mlp>(3, 5, 0.5f, 0.5f));
  const auto result = check_layer(harness, {2, 3});
  EXPECT_TRUE(result.ok) << result.report;
}

TEST(Mlp, ZeroHiddenWidthOutputsTheProjectionBias) {
  ModuleHarness harness(std::make_unique<Mlp>(3, 0, 0.5f, 0.5f));
  auto& mlp = harness.root_as<Mlp>();
  mlp.proj().bias()->data = Tensor::from_values({3}, {1, 2, 3});
  Context ctx(cpu_kernels());
  const Var y = mlp.forward(ctx, constant(seeded_normal({2, 3}, 1)));
  for (int64_t i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(y.value().data()[i], static_cast<float>(i % 3 + 1));
  const auto result = check_layer(harness, {2, 3});
  EXPECT_TRUE(result.ok) << result.report;
}

TEST(TransformerBlock, GradientsMatchFiniteDifferences) {
  ModuleHarness harness(std::make_unique<TransformerBlock>(4, 2, 0.5f, 0.5f));
  const auto result = check_layer(harness, {2, 3, 4});
  EXPECT_TRUE(result.ok) << result.report;
}

}  // namespace
}  // namespace zero3
