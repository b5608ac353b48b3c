// Embedding: lookups, and gradients that add up over repeated ids.
#include "core/nn/embedding.h"

#include <gtest/gtest.h>

#include "core/base/math_bugs.h"
#include "core/tensor/kernels.h"
#include "core/nn/module_gradcheck.h"

namespace zero3 {
namespace {

TEST(EmbeddingModule, LooksUpTheRowOfEachId) {
  ModuleHarness harness(std::make_unique<Embedding>(3, 2, 0.02f));
  auto& table = harness.root_as<Embedding>();
  table.weight().data = Tensor::from_values({3, 2}, {0, 1, 10, 11, 20, 21});
  Context ctx(cpu_kernels());
  const Var out = table.forward(ctx, Tensor::from_values({1, 2}, {2, 0}));
  ASSERT_EQ(out.shape(), (Shape{1, 2, 2}));
  EXPECT_EQ(std::vector<float>(out.value().values().begin(), out.value().values().end()),
            (std::vector<float>{20, 21, 0, 1}));
}

TEST(EmbeddingModule, GradientsOfRepeatedIdsAddUpAndMatchFiniteDifferences) {
  ModuleHarness harness(std::make_unique<Embedding>(4, 3, 0.5f));
  auto& table = harness.root_as<Embedding>();
  const Tensor ids = Tensor::from_values({2, 3}, {1, 3, 1, 0, 1, 3});
  const auto result = module_gradcheck([&](Context& ctx, const std::vector<Var>&) {
    return weighted_sum(ctx, table.forward(ctx, ids), 2);
  }, {}, harness.parameters());
  EXPECT_TRUE(result.ok) << result.report;
}

TEST(EmbeddingModule, SizeOneTableGradientsMatchFiniteDifferences) {
  ModuleHarness harness(std::make_unique<Embedding>(1, 1, 0.5f));
  auto& table = harness.root_as<Embedding>();
  const auto result = module_gradcheck([&](Context& ctx, const std::vector<Var>&) {
    return weighted_sum(ctx, table.forward(ctx, Tensor::from_values({3}, {0, 0, 0})), 2);
  }, {}, harness.parameters());
  EXPECT_TRUE(result.ok) << result.report;
}

// A token model's layers.0: ids [B, T] in, one row per token out, rows in (example, position) order.
TEST(TokenEmbedding, GivesOneRowPerTokenAndRepeatedIdsGradientsAddUp) {
  ModuleHarness harness(std::make_unique<TokenEmbedding>(4, 3, 0.5f));
  auto& table = harness.root_as<TokenEmbedding>();
  const Tensor ids = Tensor::from_values({2, 3}, {1, 3, 1, 0, 1, 3});
  Context ctx(cpu_kernels());
  const Var rows = table.forward(ctx, constant(ids));
  ASSERT_EQ(rows.shape(), (Shape{6, 3}));
  const Tensor weights = table.weight().data;
  for (int64_t token = 0; token < 6; ++token) {
    const auto id = static_cast<int64_t>(ids.data()[token]);
    for (int64_t c = 0; c < 3; ++c) EXPECT_EQ(rows.value().data()[token * 3 + c], weights.data()[id * 3 + c]);
  }
  const auto result = module_gradcheck([&](Context& c, const std::vector<Var>&) {
    return weighted_sum(c, table.forward(c, constant(ids)), 2);
  }, {}, harness.parameters());
  EXPECT_TRUE(result.ok) << result.report;
}

TEST(TokenEmbedding, RepeatedIdCountedOnceLosesTheSecondUsesGradient) {
  ModuleHarness harness(std::make_unique<TokenEmbedding>(3, 2, 0.5f));
  auto& table = harness.root_as<TokenEmbedding>();
  const Tensor ids = Tensor::from_values({1, 3}, {2, 0, 2});  // id 2 twice
  const auto grad_of_id_two = [&] {
    Context ctx(cpu_kernels());
    backward(ctx, sum(ctx, table.forward(ctx, constant(ids))));
    return ctx.param_grad(table.weight()).data()[2 * 2];
  };
  EXPECT_EQ(grad_of_id_two(), 2.0f);
  {
    const ScopedMathBug once(MathBug::embedding_backward_repeated_id_once);
    EXPECT_EQ(grad_of_id_two(), 1.0f);
  }
  EXPECT_EQ(grad_of_id_two(), 2.0f);
}

TEST(TokenEmbedding, ZeroDimensionsGiveZeroWidthRows) {
  ModuleHarness harness(std::make_unique<TokenEmbedding>(5, 0, 0.5f));
  Context ctx(cpu_kernels());
  const Var rows = harness.root_as<TokenEmbedding>().forward(ctx, constant(Tensor::from_values({1, 2}, {4, 0})));
  EXPECT_EQ(rows.shape(), (Shape{2, 0}));
}

}  // namespace
}  // namespace zero3
