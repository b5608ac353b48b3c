// reshape, transpose, slice, concat, select_rows and scatter_rows: values, gradients, shape errors.
#include "core/autograd/ops.h"

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/tensor/kernels.h"
#include "core/autograd/ops_test_support.h"

namespace zero3 {
namespace {

TEST(Reshape, KeepsRowMajorOrderAndInfersMinusOne) {
  Context ctx(cpu_kernels());
  const Var x = constant(Tensor::from_values({2, 3}, {1, 2, 3, 4, 5, 6}));
  const Var y = reshape(ctx, x, {3, -1});
  EXPECT_EQ(y.shape(), (Shape{3, 2}));
  EXPECT_EQ(values_of(y.value()), (Values{1, 2, 3, 4, 5, 6}));
}

TEST(Reshape, GradientsMatchForZeroSizedAndScalarShapes) {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{2, 3}, {3, 2}}, {{0, 3}, {3, 0}}, {{1}, {}}, {{2, 3}, {-1}}, {{2, 1, 3}, {6, 1}}};
  for (const auto& [from, to] : cases) {
    SCOPED_TRACE(shape_str(from) + " -> " + shape_str(to));
    expect_gradients_match([to = to](Context& c, const std::vector<Var>& in) {
      return weighted_sum(c, reshape(c, in[0], to));
    }, {ramp(from)});
  }
}

TEST(Reshape, AnotherElementCountRaisesNamingBothShapes) {
  Context ctx(cpu_kernels());
  const Var x = constant(Tensor::zeros({2, 3}));
  expect_shape_error([&] { reshape(ctx, x, {4}); }, {"reshape", "[2,3]", "[4]"});
  expect_shape_error([&] { reshape(ctx, x, {-1, -1}); }, {"reshape", "[-1,-1]"});
  expect_shape_error([&] { reshape(ctx, constant(Tensor::zeros({0, 3})), {0, -1}); }, {"reshape", "[0,-1]"});
}

TEST(Transpose, SwapsTwoDims) {
  Context ctx(cpu_kernels());
  const Var y = transpose(ctx, constant(Tensor::from_values({2, 3}, {1, 2, 3, 4, 5, 6})), 0, 1);
  EXPECT_EQ(y.shape(), (Shape{3, 2}));
  EXPECT_EQ(values_of(y.value()), (Values{1, 4, 2, 5, 3, 6}));
}

TEST(Transpose, GradientsMatchForNegativeDimsAndZeroSizedShapes) {
  const std::vector<std::tuple<Shape, int64_t, int64_t>> cases = {
      {{2, 3, 4}, 0, 2}, {{2, 3, 4}, -1, -2}, {{0, 3}, 0, 1}, {{1, 1}, 0, 1}, {{2, 3}, 1, 1}};
  for (const auto& [shape, d0, d1] : cases) {
    SCOPED_TRACE(shape_str(shape) + " " + std::to_string(d0) + "," + std::to_string(d1));
    expect_gradients_match([d0 = d0, d1 = d1](Context& c, const std::vector<Var>& in) {
      return weighted_sum(c, transpose(c, in[0], d0, d1));
    }, {ramp(shape)});
  }
}

TEST(Transpose, ADimOutOfRangeRaisesNamingTheShape) {
  Context ctx(cpu_kernels());
  expect_shape_error([&] { transpose(ctx, constant(Tensor::zeros({2, 3})), 0, 2); }, {"transpose", "dim 2", "[2,3]"});
}

TEST(Slice, CopiesTheRequestedRangeOfOneDim) {
  Context ctx(cpu_kernels());
  const Var x = constant(Tensor::from_values({4, 3}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(values_of(slice(ctx, x, 0, 1, 2).value()), (Values{3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(values_of(slice(ctx, x, -1, 1, 1).value()), (Values{1, 4, 7, 10}));
  EXPECT_EQ(slice(ctx, x, 1, 3, 0).shape(), (Shape{4, 0}));
}

TEST(Slice, GradientsMatchForEmptyRangesAndZeroSizedInputs) {
  const std::vector<std::tuple<Shape, int64_t, int64_t, int64_t>> cases = {
      {{4, 3}, 0, 1, 2}, {{4, 3}, 1, 2, 1}, {{4, 3}, 1, 1, 0}, {{0, 3}, 1, 1, 2}, {{2, 3, 4}, 1, 0, 3}, {{1}, 0, 0, 1}};
  for (const auto& [shape, dim, start, length] : cases) {
    SCOPED_TRACE(shape_str(shape) + " dim " + std::to_string(dim));
    expect_gradients_match([dim = dim, start = start, length = length](Context& c, const std::vector<Var>& in) {
      return weighted_sum(c, slice(c, in[0], dim, start, length));
    }, {ramp(shape)});
  }
}

TEST(Slice, ARangePastTheEndRaisesNamingTheShape) {
  Context ctx(cpu_kernels());
  expect_shape_error([&] { slice(ctx, constant(Tensor::zeros({4, 3})), 1, 2, 2); }, {"slice", "[2, 4)", "[4,3]"});
}

TEST(Concat, JoinsPartsAlongADim) {
  Context ctx(cpu_kernels());
  const Var a = constant(Tensor::from_values({2, 1}, {1, 2}));
  const Var b = constant(Tensor::from_values({2, 2}, {3, 4, 5, 6}));
  const Var out = concat(ctx, {a, constant(Tensor::zeros({2, 0})), b}, 1);
  EXPECT_EQ(out.shape(), (Shape{2, 3}));
  EXPECT_EQ(values_of(out.value()), (Values{1, 3, 4, 2, 5, 6}));
}

TEST(Concat, GradientsMatchWithEmptyParts) {
  const std::vector<std::pair<std::vector<Shape>, int64_t>> cases = {
      {{{2, 1}, {2, 0}, {2, 3}}, 1}, {{{0, 3}, {2, 3}}, 0}, {{{1}, {1}}, -1}, {{{2, 2, 1}, {2, 1, 1}}, 1}};
  for (const auto& [shapes, dim] : cases) {
    SCOPED_TRACE("dim " + std::to_string(dim) + " first " + shape_str(shapes[0]));
    std::vector<Tensor> inputs;
    for (size_t i = 0; i < shapes.size(); ++i) inputs.push_back(ramp(shapes[i], 1.0f, static_cast<int64_t>(i)));
    expect_gradients_match([dim = dim](Context& c, const std::vector<Var>& in) {
      return weighted_sum(c, concat(c, in, dim));
    }, inputs);
  }
}

TEST(Concat, PartsThatDifferOutsideTheDimRaiseNamingTheShapes) {
  Context ctx(cpu_kernels());
  expect_shape_error([&] { concat(ctx, {constant(Tensor::zeros({2, 1})), constant(Tensor::zeros({3, 1}))}, 1); },
                     {"concat", "[3,1]", "[2,1]"});
  expect_shape_error([&] { concat(ctx, {}, 0); }, {"concat"});
}

// ---------------------------------------------------------------------------------------------
// select_rows, scatter_rows

TEST(SelectRows, PicksRowsInOrderWithRepeats) {
  Context ctx(cpu_kernels());
  const Var x = constant(Tensor::from_values({3, 2}, {1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(values_of(select_rows(ctx, x, {2, 2, 0}).value()), (Values{5, 6, 5, 6, 1, 2}));
  EXPECT_EQ(select_rows(ctx, x, {}).shape(), (Shape{0, 2}));
}

TEST(ScatterRows, PlacesRowsIntoZeros) {
  Context ctx(cpu_kernels());
  const Var rows = constant(Tensor::from_values({2, 2}, {1, 2, 3, 4}));
  EXPECT_EQ(values_of(scatter_rows(ctx, rows, {3, 0}, 4).value()), (Values{3, 4, 0, 0, 0, 0, 1, 2}));
}

TEST(SelectAndScatterRows, GradientsMatchWithRepeatsNoRowsAndZeroWidth) {
  const std::vector<std::pair<Shape, std::vector<int64_t>>> select_cases = {
      {{3, 2}, {2, 2, 0}}, {{3, 2}, {}}, {{3, 0}, {1}}, {{1, 1}, {0}}};
  for (const auto& [shape, rows] : select_cases) {
    SCOPED_TRACE("select " + shape_str(shape) + " of " + std::to_string(rows.size()));
    expect_gradients_match([rows = rows](Context& c, const std::vector<Var>& in) {
      return weighted_sum(c, select_rows(c, in[0], rows));
    }, {ramp(shape)});
  }
  const std::vector<std::tuple<Shape, std::vector<int64_t>, int64_t>> scatter_cases = {
      {{2, 2}, {3, 0}, 4}, {{0, 2}, {}, 3}, {{0, 2}, {}, 0}, {{1, 0}, {0}, 2}};
  for (const auto& [shape, rows, n_rows] : scatter_cases) {
    SCOPED_TRACE("scatter " + shape_str(shape) + " into " + std::to_string(n_rows));
    expect_gradients_match([rows = rows, n_rows = n_rows](Context& c, const std::vector<Var>& in) {
      return weighted_sum(c, scatter_rows(c, in[0], rows, n_rows));
    }, {ramp(shape)});
  }
}

TEST(SelectAndScatterRows, BadRowIndicesRaiseNamingTheRow) {
  Context ctx(cpu_kernels());
  const Var x = constant(Tensor::zeros({3, 2}));
  expect_shape_error([&] { select_rows(ctx, x, {0, 3}); }, {"select_rows", "row 3", "[3,2]"});
  expect_shape_error([&] { scatter_rows(ctx, x, {0, 1, 5}, 4); }, {"scatter_rows", "row 5"});
  expect_shape_error([&] { scatter_rows(ctx, x, {0, 1, 1}, 4); }, {"scatter_rows", "unique"});
  expect_shape_error([&] { scatter_rows(ctx, x, {0, 1}, 4); }, {"scatter_rows", "[3,2]"});
}

}  // namespace
}  // namespace zero3
