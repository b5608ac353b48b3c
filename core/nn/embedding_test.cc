// Embedding: lookups, and gradients that add up over repeated ids.
#include "core/nn/embedding.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace zero3
