// matmul and linear: hand-computed products, batched and shared operands, gradients, shape errors.
#include "core/autograd/ops.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "core/tensor/kernels.h"
#include "core/autograd/ops_test_support.h"

namespace zero3 {
namespace {

TEST(Matmul, SmallIntegersGiveTheHandComputedProduct) {
  Context ctx(cpu_kernels());
  const Var a = constant(Tensor::from_values({2, 3}, {1, 2, 3, 4, 5, 6}));
  const Var b = constant(Tensor::from_values({3, 2}, {7, 8, 9, 10, 11, 12}));
  EXPECT_EQ(values_of(matmul(ctx, a, b).value()), (Values{58, 64, 139, 154}));
}

TEST(Matmul, BatchedOperandsMultiplyPerBatchAndA2DRightOperandIsShared) {
  Context ctx(cpu_kernels());
  const Var a = constant(Tensor::from_values({2, 1, 2}, {1, 2, 3, 4}));
  const Var per_batch = constant(Tensor::from_values({2, 2, 1}, {1, 1, 2, -1}));
  const Var shared = constant(Tensor::from_values({2, 1}, {1, 1}));
  EXPECT_EQ(values_of(matmul(ctx, a, per_batch).value()), (Values{3, 2}));
  EXPECT_EQ(values_of(matmul(ctx, a, shared).value()), (Values{3, 7}));
}

TEST(Matmul, AnEmptyInnerDimGivesZeros) {
  Context ctx(cpu_kernels());
  const Var out = matmul(ctx, constant(Tensor::zeros({2, 0})), constant(Tensor::zeros({0, 3})));
  EXPECT_EQ(out.shape(), (Shape{2, 3}));
  EXPECT_EQ(values_of(out.value()), Values(6, 0.0f));
}

TEST(Matmul, GradientsMatchForSharedBatchedAndZeroSizedOperands) {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{2, 3}, {3, 4}},       {{2, 2, 3}, {3, 2}}, {{2, 2, 3}, {2, 3, 2}}, {{1, 2, 2, 3}, {1, 2, 3, 2}},
      {{0, 3}, {3, 2}},       {{2, 0}, {0, 3}},    {{2, 3}, {3, 0}},       {{1, 1}, {1, 1}},
      {{0, 2, 3}, {3, 2}},
  };
  for (const auto& [a, b] : cases) {
    SCOPED_TRACE(shape_str(a) + " @ " + shape_str(b));
    expect_gradients_match(
        [](Context& c, const std::vector<Var>& in) { return weighted_sum(c, matmul(c, in[0], in[1])); },
        {ramp(a, 1.0f, 1), ramp(b, 1.0f, 2)});
  }
}

TEST(Matmul, MismatchedInnerDimsRaiseNamingBothShapes) {
  Context ctx(cpu_kernels());
  expect_shape_error([&] { matmul(ctx, constant(Tensor::zeros({2, 3})), constant(Tensor::zeros({4, 2}))); },
                     {"matmul", "[2,3]", "[4,2]"});
  expect_shape_error([&] { matmul(ctx, constant(Tensor::zeros({2, 2, 3})), constant(Tensor::zeros({3, 3, 2}))); },
                     {"matmul", "[2,2,3]", "[3,3,2]"});
}

TEST(Linear, ComputesXTimesWeightTransposedPlusBias) {
  Context ctx(cpu_kernels());
  const Var x = constant(Tensor::from_values({2, 3}, {1, 2, 3, 0, -1, 2}));
  const Var w = constant(Tensor::from_values({2, 3}, {1, 0, -1, 2, 1, 0}));
  const Var b = constant(Tensor::from_values({2}, {10, 20}));
  EXPECT_EQ(values_of(linear(ctx, x, w, b).value()), (Values{8, 24, 8, 19}));
  EXPECT_EQ(values_of(linear(ctx, x, w, Var()).value()), (Values{-2, 4, -2, -1}));
}

TEST(Linear, ZeroInputFeaturesGiveTheBiasInEveryRow) {
  Context ctx(cpu_kernels());
  const Var out = linear(ctx, constant(Tensor::zeros({2, 0})), constant(Tensor::zeros({3, 0})),
                         constant(Tensor::from_values({3}, {1, 2, 3})));
  EXPECT_EQ(values_of(out.value()), (Values{1, 2, 3, 1, 2, 3}));
}

TEST(Linear, GradientsMatchWithAndWithoutBiasOnZeroSizedAndSizeOneShapes) {
  struct Case { Shape x, w; bool bias; };
  const std::vector<Case> cases = {
      {{2, 3}, {4, 3}, true},  {{2, 3}, {4, 3}, false}, {{2, 2, 3}, {4, 3}, true}, {{3}, {2, 3}, true},
      {{2, 3}, {0, 3}, true},  {{2, 0}, {4, 0}, true},  {{0, 3}, {4, 3}, true},    {{1, 1}, {1, 1}, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(shape_str(c.x) + " weight " + shape_str(c.w) + (c.bias ? " bias" : ""));
    std::vector<Tensor> inputs = {ramp(c.x, 1.0f, 1), ramp(c.w, 1.0f, 2)};
    if (c.bias) inputs.push_back(ramp({c.w[0]}, 1.0f, 3));
    expect_gradients_match([&](Context& ctx, const std::vector<Var>& in) {
      return weighted_sum(ctx, linear(ctx, in[0], in[1], c.bias ? in[2] : Var()));
    }, inputs);
  }
}

TEST(Linear, MismatchedShapesRaiseNamingXWeightAndBias) {
  Context ctx(cpu_kernels());
  expect_shape_error([&] { linear(ctx, constant(Tensor::zeros({2, 3})), constant(Tensor::zeros({4, 5})), Var()); },
                     {"linear", "[2,3]", "[4,5]"});
  expect_shape_error([&] {
    linear(ctx, constant(Tensor::zeros({2, 3})), constant(Tensor::zeros({4, 3})), constant(Tensor::zeros({3})));
  }, {"linear", "[4,3]", "bias [3]"});
}

TEST(Linear, Gpt2SizedLmHeadOnMetaInfersTheShapeAndAllocatesNothing) {
  Context ctx(cpu_kernels());
  Var x = leaf(Tensor::meta({1024, 768}));
  Var w = leaf(Tensor::meta({50257, 768}));
  Var logits = linear(ctx, x, w, Var());
  EXPECT_TRUE(logits.value().is_meta());
  EXPECT_EQ(logits.shape(), (Shape{1024, 50257}));
  EXPECT_EQ(logits.value().storage_id(), nullptr);
  backward(ctx, sum(ctx, logits));
  EXPECT_TRUE(w.grad().is_meta());
  EXPECT_EQ(w.grad().shape(), (Shape{50257, 768}));
  EXPECT_EQ(w.grad().storage_id(), nullptr);
}

}  // namespace
}  // namespace zero3
