// add, sub and mul against a naive broadcast loop for every shape pair, scale, gelu, relu, silu and to_bf16.
#include "core/autograd/ops.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/autograd/gradcheck.h"
#include "core/tensor/kernels.h"
#include "core/autograd/ops_test_support.h"

namespace zero3 {
namespace {

struct BroadcastCase {
  Shape a, b, out;
};

const std::vector<BroadcastCase> kBroadcastCases = {
    {{2, 3}, {2, 3}, {2, 3}},        {{4, 1}, {1}, {4, 1}},           {{3, 1}, {3}, {3, 3}},
    {{}, {2, 3}, {2, 3}},            {{2, 3}, {}, {2, 3}},            {{4, 1}, {0}, {4, 0}},
    {{0, 3}, {3}, {0, 3}},           {{1, 1}, {1, 4}, {1, 4}},        {{2, 1, 3}, {4, 1}, {2, 4, 3}},
    {{2, 3}, {1, 3}, {2, 3}},        {{3}, {2, 3}, {2, 3}},           {{1}, {1}, {1}},
};

struct NamedBinary {
  const char* name;
  Var (*op)(Context&, const Var&, const Var&);
  float (*reference)(float, float);
};

const std::vector<NamedBinary> kBinaryOps = {
    {"add", add, [](float x, float y) { return x + y; }},
    {"sub", sub, [](float x, float y) { return x - y; }},
    {"mul", mul, [](float x, float y) { return x * y; }},
};

// The element of `shape` that broadcasting reads for output multi-index `index`.
int64_t broadcast_offset(const Shape& shape, const Shape& index) {
  int64_t offset = 0;
  const size_t lead = index.size() - shape.size();
  for (size_t d = 0; d < shape.size(); ++d) offset = offset * shape[d] + (shape[d] == 1 ? 0 : index[lead + d]);
  return offset;
}

Values naive_broadcast(float (*f)(float, float), const Tensor& a, const Tensor& b, const Shape& out) {
  Values result;
  Shape index(out.size(), 0);
  for (int64_t flat = 0; flat < shape_numel(out); ++flat) {
    int64_t rest = flat;
    for (int64_t d = static_cast<int64_t>(out.size()) - 1; d >= 0; --d) {
      index[d] = rest % out[d];
      rest /= out[d];
    }
    result.push_back(f(a.data()[broadcast_offset(a.shape(), index)], b.data()[broadcast_offset(b.shape(), index)]));
  }
  return result;
}

TEST(Elementwise, ForwardMatchesANaiveBroadcastLoopForEveryShapePair) {
  for (const NamedBinary& op : kBinaryOps) {
    for (const BroadcastCase& c : kBroadcastCases) {
      SCOPED_TRACE(std::string(op.name) + " " + shape_str(c.a) + " " + shape_str(c.b));
      Context ctx(cpu_kernels());
      const Tensor a = ramp(c.a, 1.0f, 1), b = ramp(c.b, 2.0f, 2);
      const Var out = op.op(ctx, constant(a), constant(b));
      ASSERT_EQ(out.shape(), c.out);
      EXPECT_EQ(values_of(out.value()), naive_broadcast(op.reference, a, b, c.out));
    }
  }
}

TEST(Elementwise, GradientsMatchFiniteDifferencesForEveryShapePair) {
  for (const NamedBinary& op : kBinaryOps) {
    for (const BroadcastCase& c : kBroadcastCases) {
      SCOPED_TRACE(std::string(op.name) + " " + shape_str(c.a) + " " + shape_str(c.b));
      expect_gradients_match([&](Context& ctx, const std::vector<Var>& in) {
        return weighted_sum(ctx, op.op(ctx, in[0], in[1]));
      }, {ramp(c.a, 1.0f, 1), ramp(c.b, 2.0f, 2)});
    }
  }
}

TEST(Elementwise, SmallIntegersGiveHandComputedResults) {
  Context ctx(cpu_kernels());
  const Var a = constant(Tensor::from_values({2, 1}, {1, 2}));
  const Var b = constant(Tensor::from_values({3}, {10, 20, 30}));
  EXPECT_EQ(values_of(add(ctx, a, b).value()), (Values{11, 21, 31, 12, 22, 32}));
  EXPECT_EQ(values_of(sub(ctx, a, b).value()), (Values{-9, -19, -29, -8, -18, -28}));
  EXPECT_EQ(values_of(mul(ctx, a, b).value()), (Values{10, 20, 30, 20, 40, 60}));
}

// The broadcast trap: x[B,1] * p[0] is a valid [B,0] product whose sum is 0, and x gets a zero gradient.
TEST(Elementwise, SizeOneTimesSizeZeroIsAnEmptyProductThatSumsToZero) {
  Context ctx(cpu_kernels());
  Var x = leaf(Tensor::from_values({3, 1}, {1, 2, 3}));
  Var p = leaf(Tensor::zeros({0}));
  Var product = mul(ctx, x, p);
  EXPECT_EQ(product.shape(), (Shape{3, 0}));
  Var total = sum(ctx, product);
  EXPECT_EQ(total.value().item(), 0.0f);
  backward(ctx, total);
  EXPECT_EQ(values_of(x.grad()), (Values{0, 0, 0}));
  EXPECT_EQ(p.grad().shape(), (Shape{0}));
}

TEST(Elementwise, IncompatibleShapesRaiseNamingTheOpAndBothShapes) {
  Context ctx(cpu_kernels());
  for (const NamedBinary& op : kBinaryOps) {
    expect_shape_error([&] { op.op(ctx, constant(Tensor::zeros({2, 3})), constant(Tensor::zeros({4}))); },
                       {op.name, "[2,3]", "[4]"});
  }
}

TEST(Scale, MultipliesEveryElementAndGradientsMatch) {
  Context ctx(cpu_kernels());
  const Var x = constant(Tensor::from_values({3}, {1, -2, 4}));
  EXPECT_EQ(values_of(scale(ctx, x, -0.5f).value()), (Values{-0.5f, 1, -2}));
  for (const Shape& shape : {Shape{2, 3}, Shape{0, 3}, Shape{1}, Shape{}}) {
    SCOPED_TRACE(shape_str(shape));
    expect_gradients_match(
        [](Context& c, const std::vector<Var>& in) { return weighted_sum(c, scale(c, in[0], -1.5f)); }, {ramp(shape)});
  }
}

// ---------------------------------------------------------------------------------------------
// gelu, relu

TEST(Gelu, MatchesTheTanhApproximationAtKnownPoints) {
  Context ctx(cpu_kernels());
  const Var y = gelu(ctx, constant(Tensor::from_values({6}, {0, 1, -1, 2, -3, 0.5f})));
  // GPT-2's tanh form, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), evaluated in double.
  expect_close(y.value(), {0.0f, 0.8411919906f, -0.1588080094f, 1.9545976941f, -0.0036373921f, 0.3457140098f});
}

TEST(Relu, ZeroesNegativesAndKeepsPositives) {
  Context ctx(cpu_kernels());
  EXPECT_EQ(values_of(relu(ctx, constant(Tensor::from_values({4}, {-1, 0, 2, -0.5f}))).value()), (Values{0, 0, 2, 0}));
}

TEST(Silu, IsXTimesTheSigmoidOfX) {
  Context ctx(cpu_kernels());
  const Var y = silu(ctx, constant(Tensor::from_values({5}, {0, 1, -1, 20, -3})));
  // x / (1 + e^-x) in double.
  expect_close(y.value(), {0.0f, 0.7310585786f, -0.2689414214f, 19.9999999588f, -0.1422776195f});
}

TEST(Unary, GeluReluAndSiluGradientsMatchOnEveryShape) {
  for (auto op : {gelu, relu, silu}) {
    for (const Shape& shape : {Shape{2, 3}, Shape{0, 3}, Shape{1}, Shape{}, Shape{2, 1, 5}}) {
      SCOPED_TRACE(shape_str(shape));
      expect_gradients_match([op](Context& c, const std::vector<Var>& in) { return weighted_sum(c, op(c, in[0])); },
                             {ramp(shape, 3.0f)});
    }
  }
}

// ---------------------------------------------------------------------------------------------
// bf16

TEST(ToBf16, RoundsToNearestEvenAndPassesTheGradientThrough) {
  Context ctx(cpu_kernels());
  Var x = leaf(Tensor::from_values({3}, {1.0f + kBf16UlpAtOne / 2, 1.0f + 3 * kBf16UlpAtOne / 2, 3.0f}));
  Var y = to_bf16(ctx, x);
  EXPECT_EQ(y.value().dtype(), DType::bf16);
  EXPECT_EQ(values_of(y.value()), (Values{1.0f, 1.0f + 2 * kBf16UlpAtOne, 3.0f}));
  backward(ctx, weighted_sum(ctx, y));
  EXPECT_EQ(x.grad().dtype(), DType::f32);
}

TEST(ToBf16, GradientIsTheIdentityOnBf16GridSteps) {
  // Quarter steps around multiples of 0.25 stay on the bf16 grid, so the difference quotient is exact.
  for (const Shape& shape : {Shape{2, 3}, Shape{0, 3}, Shape{}}) {
    Values values(static_cast<size_t>(shape_numel(shape)));
    for (size_t i = 0; i < values.size(); ++i) values[i] = 0.25f * static_cast<float>(i) - 0.5f;
    GradcheckOptions options;
    options.step = 0.25;
    expect_gradients_match([](Context& c, const std::vector<Var>& in) { return weighted_sum(c, to_bf16(c, in[0])); },
                           {Tensor::from_values(shape, values)}, options);
  }
}

}  // namespace
}  // namespace zero3
