// sum, mean, cross_entropy and mse: known values, gradients, and errors for empty or mismatched inputs.
#include "core/autograd/ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <utility>
#include <vector>

#include "core/tensor/kernels.h"
#include "core/autograd/ops_test_support.h"

namespace zero3 {
namespace {

TEST(Sum, AddsAllElementsAndIsZeroForAnEmptyTensor) {
  Context ctx(cpu_kernels());
  EXPECT_EQ(sum(ctx, constant(Tensor::from_values({2, 2}, {1, 2, 3, 4}))).value().item(), 10.0f);
  EXPECT_EQ(sum(ctx, constant(Tensor::zeros({0, 3}))).value().item(), 0.0f);
  EXPECT_EQ(sum(ctx, constant(Tensor::zeros({0, 3}))).shape(), Shape{});
}

TEST(Mean, AveragesAllElementsAndRaisesForAnEmptyTensor) {
  Context ctx(cpu_kernels());
  EXPECT_EQ(mean(ctx, constant(Tensor::from_values({2, 2}, {1, 2, 3, 6}))).value().item(), 3.0f);
  expect_shape_error([&] { mean(ctx, constant(Tensor::zeros({0, 3}))); }, {"mean", "[0,3]"});
}

TEST(SumAndMean, GradientsMatchOnEveryShape) {
  for (const Shape& shape : {Shape{2, 3}, Shape{1}, Shape{}, Shape{0, 3}}) {
    SCOPED_TRACE(shape_str(shape));
    expect_gradients_match([](Context& c, const std::vector<Var>& in) { return scale(c, sum(c, in[0]), 1.5f); },
                           {ramp(shape)});
    if (shape_numel(shape) == 0) continue;
    expect_gradients_match([](Context& c, const std::vector<Var>& in) { return scale(c, mean(c, in[0]), 1.5f); },
                           {ramp(shape)});
  }
}

// ---------------------------------------------------------------------------------------------
// cross_entropy, mse

TEST(CrossEntropy, UniformLogitsGiveLogOfTheVocabulary) {
  Context ctx(cpu_kernels());
  const Var loss = cross_entropy(ctx, constant(Tensor::zeros({2, 4})), Tensor::from_values({2}, {0, 3}));
  EXPECT_NEAR(loss.value().item(), std::log(4.0f), 1e-6f);
  EXPECT_EQ(loss.shape(), Shape{});
}

TEST(CrossEntropy, ATargetWithHalfTheMassCostsLogTwo) {
  Context ctx(cpu_kernels());
  // softmax([0, 0, ln 2]) = [1/4, 1/4, 1/2].
  const Var logits = constant(Tensor::from_values({1, 3}, {0, 0, std::log(2.0f)}));
  EXPECT_NEAR(cross_entropy(ctx, logits, Tensor::from_values({1}, {2})).value().item(), std::log(2.0f), 1e-6f);
}

TEST(CrossEntropy, GradientsMatchIncludingASingleClass) {
  const std::vector<std::pair<Shape, Tensor>> cases = {
      {{3, 5}, Tensor::from_values({3}, {4, 0, 2})}, {{1, 1}, Tensor::from_values({1}, {0})},
      {{2, 2}, Tensor::from_values({2}, {1, 1})}};
  for (const auto& [shape, targets] : cases) {
    SCOPED_TRACE(shape_str(shape));
    expect_gradients_match([targets = targets](Context& c, const std::vector<Var>& in) {
      return scale(c, cross_entropy(c, in[0], targets), 1.5f);
    }, {ramp(shape, 5.0f)});
  }
}

TEST(CrossEntropy, NoRowsOrABadTargetRaiseNamingTheProblem) {
  Context ctx(cpu_kernels());
  expect_shape_error([&] { cross_entropy(ctx, constant(Tensor::zeros({0, 4})), Tensor::zeros({0})); },
                     {"cross_entropy", "[0,4]"});
  expect_shape_error([&] { cross_entropy(ctx, constant(Tensor::zeros({2, 4})), Tensor::from_values({2}, {0, 4})); },
                     {"cross_entropy", "target 4", "[2,4]"});
  expect_shape_error([&] { cross_entropy(ctx, constant(Tensor::zeros({2, 4})), Tensor::zeros({3})); },
                     {"cross_entropy", "[2,4]", "[3]"});
}

TEST(Mse, AveragesSquaredDifferences) {
  Context ctx(cpu_kernels());
  const Var loss = mse(ctx, constant(Tensor::from_values({3}, {1, 2, 3})), Tensor::from_values({3}, {1, 0, 0}));
  EXPECT_NEAR(loss.value().item(), 13.0f / 3.0f, 1e-6f);
}

TEST(Mse, GradientsMatchOnEveryShape) {
  for (const Shape& shape : {Shape{2, 3}, Shape{1}, Shape{}, Shape{2, 1, 2}}) {
    SCOPED_TRACE(shape_str(shape));
    const Tensor target = ramp(shape, 2.0f, 5);
    expect_gradients_match([target](Context& c, const std::vector<Var>& in) { return mse(c, in[0], target); },
                           {ramp(shape)});
  }
}

TEST(Mse, DifferentOrEmptyShapesRaiseInsteadOfBroadcasting) {
  Context ctx(cpu_kernels());
  expect_shape_error([&] { mse(ctx, constant(Tensor::zeros({3, 1})), Tensor::zeros({3})); }, {"mse", "[3,1]", "[3]"});
  expect_shape_error([&] { mse(ctx, constant(Tensor::zeros({0, 2})), Tensor::zeros({0, 2})); }, {"mse", "[0,2]"});
}

}  // namespace
}  // namespace zero3
