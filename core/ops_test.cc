// Every op in ops.h: forward values against hand-computed or naive-loop references, gradients
// against finite differences (zero-sized, size-1 and broadcast shapes included), shape inference
// on meta, bf16 rounding and promotion, and ShapeErrors that name the op and the shapes.
#include "core/ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "core/errors.h"
#include "core/gradcheck.h"
#include "core/kernels.h"

namespace zero3 {
namespace {

using Values = std::vector<float>;

// Deterministic values from the element index: multiples of 0.1 offset by 0.05 times `spread`, so
// none lies within a gradcheck step of 0 (relu's kink) and neighbours differ.
Tensor ramp(const Shape& shape, float spread = 1.0f, int64_t seed = 0) {
  Values values(static_cast<size_t>(shape_numel(shape)));
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = spread * (0.1f * static_cast<float>((static_cast<int64_t>(i) * 7 + seed * 3) % 9 - 4) + 0.05f);
  }
  return Tensor::from_values(shape, values);
}

// A weighted sum makes every output element matter differently, so a transposed or misplaced
// gradient cannot pass the way it might under a plain sum.
Var weighted_sum(Context& ctx, const Var& v) {
  Values weights(static_cast<size_t>(v.value().numel()));
  for (size_t i = 0; i < weights.size(); ++i) weights[i] = 0.3f * static_cast<float>((i * 5) % 7) - 0.8f;
  return sum(ctx, mul(ctx, v, constant(Tensor::from_values(v.shape(), weights))));
}

Values values_of(const Tensor& t) { return Values(t.values().begin(), t.values().end()); }

void expect_close(const Tensor& got, const Values& expected, float tolerance = 1e-5f) {
  ASSERT_EQ(got.numel(), static_cast<int64_t>(expected.size())) << describe(got);
  float max_diff = 0.0f;
  int wrong = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    const float diff = std::abs(got.data()[i] - expected[i]);
    max_diff = std::max(max_diff, diff);
    if (!(diff <= tolerance)) {
      if (wrong++ < 4) ADD_FAILURE() << "element " << i << ": got " << got.data()[i] << " want " << expected[i];
    }
  }
  EXPECT_EQ(wrong, 0) << "#wrong=" << wrong << " max_diff=" << max_diff;
}

void expect_gradients_match(const GradcheckLoss& loss, const std::vector<Tensor>& inputs,
                            const GradcheckOptions& options = {}) {
  const GradcheckResult result = gradcheck(loss, inputs, options);
  EXPECT_TRUE(result.ok) << result.report;
}

// Runs `body` and checks it raises a ShapeError whose message contains every fragment.
void expect_shape_error(const std::function<void()>& body, const std::vector<std::string>& fragments) {
  try {
    body();
    ADD_FAILURE() << "expected a ShapeError mentioning " << fragments[0];
  } catch (const ShapeError& error) {
    const std::string message = error.what();
    for (const std::string& fragment : fragments) EXPECT_NE(message.find(fragment), std::string::npos) << message;
  }
}

Var leaf(const Tensor& value) { return Var(value, /*requires_grad=*/true); }

// ---------------------------------------------------------------------------------------------
// gradcheck itself

TEST(Gradcheck, AcceptsTheHeaderExample) {
  const GradcheckResult result = gradcheck([](Context& ctx, const std::vector<Var>& in) {
    return sum(ctx, mul(ctx, in[0], in[1]));
  }, {Tensor::from_values({2, 1}, {1, 2}), Tensor::from_values({3}, {3, 4, 5})});
  EXPECT_TRUE(result.ok) << result.report;
  EXPECT_EQ(result.wrong, 0);
}

// An op whose backward claims d(2x)/dx = 1: gradcheck must flag every element and name them.
TEST(Gradcheck, FlagsAWrongBackwardAndReportsTheElements) {
  const auto wrong_double = [](Context& ctx, const std::vector<Var>& in) {
    Var x = in[0];
    Tensor value = Tensor::zeros(x.shape());
    ctx.kernels().scale(x.value(), 2.0f, value);
    Var out(value, true);
    TapeOp op{"wrong_double", {x}, out, [x](Context& c, const Tensor& grad) mutable { x.accumulate_grad(c, grad); }};
    ctx.tape().record(op);
    return sum(ctx, out);
  };
  const GradcheckResult result = gradcheck(wrong_double, {Tensor::from_values({2, 2}, {1, 2, 3, 4})});
  EXPECT_FALSE(result.ok);
  EXPECT_EQ(result.wrong, 4);
  EXPECT_NEAR(result.max_abs_diff, 1.0, 1e-3);
  EXPECT_NE(result.report.find("input 0 element 3 [1,1]"), std::string::npos) << result.report;
  EXPECT_NE(result.report.find("WRONG"), std::string::npos) << result.report;
}

// ---------------------------------------------------------------------------------------------
// add, sub, mul

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

TEST(Unary, GeluAndReluGradientsMatchOnEveryShape) {
  for (auto op : {gelu, relu}) {
    for (const Shape& shape : {Shape{2, 3}, Shape{0, 3}, Shape{1}, Shape{}, Shape{2, 1, 5}}) {
      SCOPED_TRACE(shape_str(shape));
      expect_gradients_match([op](Context& c, const std::vector<Var>& in) { return weighted_sum(c, op(c, in[0])); },
                             {ramp(shape, 3.0f)});
    }
  }
}

// ---------------------------------------------------------------------------------------------
// matmul, linear

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

// ---------------------------------------------------------------------------------------------
// layer_norm, embedding

TEST(LayerNorm, NormalisesAKnownRowThenScalesAndShifts) {
  Context ctx(cpu_kernels());
  const Var x = constant(Tensor::from_values({2, 4}, {1, 2, 3, 4, 1, 2, 3, 4}));
  const Var gamma = constant(Tensor::from_values({4}, {1, 1, 2, 2}));
  const Var beta = constant(Tensor::from_values({4}, {0, 0, 1, 1}));
  // Mean 2.5, biased variance 1.25.
  const float rstd = 1.0f / std::sqrt(1.25f + 1e-5f);
  const Values xhat = {-1.5f * rstd, -0.5f * rstd, 0.5f * rstd, 1.5f * rstd};
  const Values row = {xhat[0], xhat[1], 2 * xhat[2] + 1, 2 * xhat[3] + 1};
  Values expected = row;
  expected.insert(expected.end(), row.begin(), row.end());
  expect_close(layer_norm(ctx, x, gamma, beta).value(), expected);
}

TEST(LayerNorm, GradientsMatchIncludingEmptyRowsAndSizeOneOrZeroWidth) {
  for (const Shape& shape : {Shape{3, 4}, Shape{2, 2, 4}, Shape{4}, Shape{0, 4}, Shape{3, 1}, Shape{2, 0}}) {
    SCOPED_TRACE(shape_str(shape));
    const Shape c = {shape.back()};
    expect_gradients_match([](Context& ctx, const std::vector<Var>& in) {
      return weighted_sum(ctx, layer_norm(ctx, in[0], in[1], in[2]));
    }, {ramp(shape, 10.0f), ramp(c, 1.0f, 1), ramp(c, 1.0f, 2)});
  }
}

TEST(LayerNorm, GammaOfTheWrongWidthRaisesNamingTheShapes) {
  Context ctx(cpu_kernels());
  expect_shape_error([&] {
    layer_norm(ctx, constant(Tensor::zeros({2, 4})), constant(Tensor::zeros({3})), constant(Tensor::zeros({4})));
  }, {"layer_norm", "[2,4]", "[3]"});
}

TEST(Embedding, PicksTableRowsByIdAndKeepsTheIdsShape) {
  Context ctx(cpu_kernels());
  const Var table = constant(Tensor::from_values({3, 2}, {1, 2, 3, 4, 5, 6}));
  const Var out = embedding(ctx, table, Tensor::from_values({2, 2}, {2, 0, 1, 2}));
  EXPECT_EQ(out.shape(), (Shape{2, 2, 2}));
  EXPECT_EQ(values_of(out.value()), (Values{5, 6, 1, 2, 3, 4, 5, 6}));
}

TEST(Embedding, GradientsMatchWithRepeatedIdsNoIdsAndZeroWidth) {
  const std::vector<std::pair<Shape, Tensor>> cases = {
      {{3, 2}, Tensor::from_values({3}, {1, 1, 0})},
      {{4, 3}, Tensor::from_values({2, 2}, {3, 0, 3, 2})},
      {{3, 2}, Tensor::zeros({0})},
      {{3, 0}, Tensor::from_values({2}, {2, 1})},
      {{1, 2}, Tensor::from_values({1}, {0})},
  };
  for (const auto& [table, ids] : cases) {
    SCOPED_TRACE(shape_str(table) + " ids " + shape_str(ids.shape()));
    expect_gradients_match([ids = ids](Context& c, const std::vector<Var>& in) {
      return weighted_sum(c, embedding(c, in[0], ids));
    }, {ramp(table)});
  }
}

TEST(Embedding, AnIdOutsideTheTableRaisesNamingTheId) {
  Context ctx(cpu_kernels());
  const Var table = constant(Tensor::zeros({5, 2}));
  expect_shape_error([&] { embedding(ctx, table, Tensor::from_values({2}, {1, 5})); }, {"embedding", "id 5", "[5,2]"});
  expect_shape_error([&] { embedding(ctx, table, Tensor::from_values({1}, {-1})); }, {"id -1"});
  expect_shape_error([&] { embedding(ctx, table, Tensor::from_values({1}, {1.5f})); }, {"id 1.5"});
}

// ---------------------------------------------------------------------------------------------
// reshape, transpose, slice, concat

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

// ---------------------------------------------------------------------------------------------
// sum, mean

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
// causal_softmax, causal_self_attention

TEST(CausalSoftmax, EachQuerySeesOnlyItselfAndEarlierKeys) {
  Context ctx(cpu_kernels());
  const float ln3 = std::log(3.0f);
  const Var scores = constant(Tensor::from_values({1, 3, 3}, {5, 9, 9, 0, ln3, 9, 0, 0, 0}));
  expect_close(causal_softmax(ctx, scores).value(), {1, 0, 0, 0.25f, 0.75f, 0, 1 / 3.0f, 1 / 3.0f, 1 / 3.0f});
}

TEST(CausalSoftmax, GradientsMatchForBatchedSizeOneAndEmptyScores) {
  for (const Shape& shape : {Shape{2, 3, 3}, Shape{2, 2, 4, 4}, Shape{1, 1, 1}, Shape{2, 0, 0}, Shape{3, 3}}) {
    SCOPED_TRACE(shape_str(shape));
    expect_gradients_match(
        [](Context& c, const std::vector<Var>& in) { return weighted_sum(c, causal_softmax(c, in[0])); },
        {ramp(shape, 5.0f)});
  }
}

TEST(CausalSoftmax, NonSquareScoresRaiseNamingTheShape) {
  Context ctx(cpu_kernels());
  expect_shape_error([&] { causal_softmax(ctx, constant(Tensor::zeros({2, 3, 4}))); }, {"causal_softmax", "[2,3,4]"});
}

// The textbook loop: per batch, head and query, softmax over earlier keys of q.k / sqrt(head_dim).
Values naive_attention(const Tensor& qkv, int64_t heads) {
  const int64_t batch = qkv.dim(0), steps = qkv.dim(1), channels = qkv.dim(2) / 3, head_dim = channels / heads;
  const auto at = [&](int64_t b, int64_t t, int64_t c) {
    return static_cast<double>(qkv.data()[(b * steps + t) * 3 * channels + c]);
  };
  Values out(static_cast<size_t>(batch * steps * channels), 0.0f);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t i = 0; i < steps; ++i) {
        std::vector<double> weights(static_cast<size_t>(i + 1));
        double total = 0.0;
        for (int64_t j = 0; j <= i; ++j) {
          double dot = 0.0;
          for (int64_t d = 0; d < head_dim; ++d) {
            dot += at(b, i, h * head_dim + d) * at(b, j, channels + h * head_dim + d);
          }
          weights[j] = std::exp(dot / std::sqrt(static_cast<double>(head_dim)));
          total += weights[j];
        }
        for (int64_t d = 0; d < head_dim; ++d) {
          double value = 0.0;
          for (int64_t j = 0; j <= i; ++j) value += weights[j] / total * at(b, j, 2 * channels + h * head_dim + d);
          out[(b * steps + i) * channels + h * head_dim + d] = static_cast<float>(value);
        }
      }
    }
  }
  return out;
}

TEST(CausalSelfAttention, MatchesANaiveLoopOverBatchHeadsAndQueries) {
  Context ctx(cpu_kernels());
  const Tensor qkv = ramp({2, 3, 12}, 4.0f);
  const Var out = causal_self_attention(ctx, constant(qkv), 2);
  EXPECT_EQ(out.shape(), (Shape{2, 3, 4}));
  expect_close(out.value(), naive_attention(qkv, 2));
}

TEST(CausalSelfAttention, TheFirstPositionReturnsItsOwnValue) {
  Context ctx(cpu_kernels());
  const Var out = causal_self_attention(ctx, constant(Tensor::from_values({1, 1, 6}, {9, 8, 7, 6, 5, -4})), 2);
  expect_close(out.value(), {5, -4});
}

TEST(CausalSelfAttention, GradientsMatchForSeveralHeadsAndEmptyBatchOrSequence) {
  const std::vector<std::pair<Shape, int64_t>> cases = {
      {{2, 3, 12}, 2}, {{1, 4, 6}, 1}, {{1, 1, 3}, 1}, {{0, 2, 6}, 2}, {{1, 0, 6}, 1}, {{1, 2, 0}, 1}};
  for (const auto& [shape, heads] : cases) {
    SCOPED_TRACE(shape_str(shape) + " heads " + std::to_string(heads));
    expect_gradients_match([heads = heads](Context& c, const std::vector<Var>& in) {
      return weighted_sum(c, causal_self_attention(c, in[0], heads));
    }, {ramp(shape, 4.0f)});
  }
}

TEST(CausalSelfAttention, ChannelsThatDoNotSplitRaiseNamingTheShape) {
  Context ctx(cpu_kernels());
  expect_shape_error([&] { causal_self_attention(ctx, constant(Tensor::zeros({1, 2, 7})), 1); },
                     {"causal_self_attention", "[1,2,7]"});
  expect_shape_error([&] { causal_self_attention(ctx, constant(Tensor::zeros({1, 2, 6})), 4); },
                     {"causal_self_attention", "4 heads"});
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

// ---------------------------------------------------------------------------------------------
// bf16

constexpr float kBf16UlpAtOne = 1.0f / 128.0f;

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

TEST(DTypePromotion, Bf16WithBf16StaysBf16AndMixingWithF32GivesF32) {
  Context ctx(cpu_kernels());
  const Var b = constant(Tensor::from_values({2}, {1, 2}, DType::bf16));
  const Var f = constant(Tensor::from_values({2}, {1, 2}));
  EXPECT_EQ(add(ctx, b, b).value().dtype(), DType::bf16);
  EXPECT_EQ(mul(ctx, b, f).value().dtype(), DType::f32);
  EXPECT_EQ(gelu(ctx, b).value().dtype(), DType::bf16);
  EXPECT_EQ(sum(ctx, b).value().dtype(), DType::bf16);
  const Var w = constant(Tensor::from_values({1, 2}, {1, 1}, DType::bf16));
  EXPECT_EQ(linear(ctx, reshape(ctx, b, {1, 2}), w, Var()).value().dtype(), DType::bf16);
  EXPECT_EQ(linear(ctx, reshape(ctx, f, {1, 2}), w, Var()).value().dtype(), DType::f32);
}

TEST(DTypePromotion, Bf16MatmulRoundsTheExactSumOnce) {
  Context ctx(cpu_kernels());
  // 1*(1 + ulp) + 1*(ulp/2) = 1 + 1.5 ulp: exact in f32, a tie in bf16 that goes to the even 1 + 2 ulp.
  const Values b_values = {1.0f + kBf16UlpAtOne, kBf16UlpAtOne / 2};
  const Var ones_bf16 = constant(Tensor::from_values({1, 2}, {1, 1}, DType::bf16));
  const Var b_bf16 = constant(Tensor::from_values({2, 1}, b_values, DType::bf16));
  const Var b_f32 = constant(Tensor::from_values({2, 1}, b_values));
  EXPECT_EQ(matmul(ctx, ones_bf16, b_bf16).value().item(), 1.0f + 2 * kBf16UlpAtOne);
  EXPECT_EQ(matmul(ctx, ones_bf16, b_f32).value().item(), 1.0f + 1.5f * kBf16UlpAtOne);
}

TEST(DTypePromotion, TheGradientOfABf16LeafIsBf16) {
  Context ctx(cpu_kernels());
  Var x = leaf(Tensor::from_values({2}, {1, 2}, DType::bf16));
  backward(ctx, sum(ctx, mul(ctx, x, constant(Tensor::from_values({2}, {3, 0.1f})))));
  EXPECT_EQ(x.grad().dtype(), DType::bf16);
  EXPECT_EQ(values_of(x.grad()), (Values{3.0f, round_to_bf16(0.1f)}));
}

// ---------------------------------------------------------------------------------------------
// meta

TEST(Meta, EveryOpInfersItsShapeWithoutData) {
  Context ctx(cpu_kernels());
  const auto m = [](const Shape& shape) { return leaf(Tensor::meta(shape)); };
  const std::vector<std::tuple<std::string, std::function<Var()>, Shape>> cases = {
      {"add", [&] { return add(ctx, m({4, 1}), m({0})); }, {4, 0}},
      {"sub", [&] { return sub(ctx, m({3, 1}), m({3})); }, {3, 3}},
      {"mul", [&] { return mul(ctx, m({}), m({2, 3})); }, {2, 3}},
      {"scale", [&] { return scale(ctx, m({2, 3}), 2.0f); }, {2, 3}},
      {"gelu", [&] { return gelu(ctx, m({5})); }, {5}},
      {"relu", [&] { return relu(ctx, m({0, 5})); }, {0, 5}},
      {"matmul", [&] { return matmul(ctx, m({2, 7, 3}), m({3, 4})); }, {2, 7, 4}},
      {"linear", [&] { return linear(ctx, m({2, 5, 8}), m({0, 8}), m({0})); }, {2, 5, 0}},
      {"layer_norm", [&] { return layer_norm(ctx, m({2, 6}), m({6}), m({6})); }, {2, 6}},
      {"embedding", [&] { return embedding(ctx, m({50257, 768}), Tensor::meta({4, 1024})); }, {4, 1024, 768}},
      {"reshape", [&] { return reshape(ctx, m({2, 6}), {3, -1}); }, {3, 4}},
      {"transpose", [&] { return transpose(ctx, m({2, 3, 4}), 0, 2); }, {4, 3, 2}},
      {"slice", [&] { return slice(ctx, m({2, 9}), 1, 3, 3); }, {2, 3}},
      {"concat", [&] { return concat(ctx, {m({2, 1}), m({2, 4})}, 1); }, {2, 5}},
      {"select_rows", [&] { return select_rows(ctx, m({5, 3}), {4, 4}); }, {2, 3}},
      {"scatter_rows", [&] { return scatter_rows(ctx, m({2, 3}), {0, 4}, 5); }, {5, 3}},
      {"sum", [&] { return sum(ctx, m({2, 3})); }, {}},
      {"mean", [&] { return mean(ctx, m({2, 3})); }, {}},
      {"causal_softmax", [&] { return causal_softmax(ctx, m({2, 12, 64, 64})); }, {2, 12, 64, 64}},
      {"causal_self_attention", [&] { return causal_self_attention(ctx, m({8, 1024, 2304}), 12); }, {8, 1024, 768}},
      {"cross_entropy", [&] { return cross_entropy(ctx, m({1024, 50257}), Tensor::meta({1024})); }, {}},
      {"mse", [&] { return mse(ctx, m({4, 2}), Tensor::meta({4, 2})); }, {}},
      {"to_bf16", [&] { return to_bf16(ctx, m({3})); }, {3}},
  };
  for (const auto& [name, build, expected] : cases) {
    SCOPED_TRACE(name);
    const Var out = build();
    EXPECT_TRUE(out.value().is_meta());
    EXPECT_EQ(out.value().storage_id(), nullptr);
    EXPECT_EQ(out.shape(), expected);
  }
}

TEST(Meta, ShapeOnlyBackwardGivesMetaGradientsOfEveryInputShape) {
  Context ctx(cpu_kernels());
  Var x = leaf(Tensor::meta({4, 8}));
  Var w = leaf(Tensor::meta({16, 8}));
  Var b = leaf(Tensor::meta({16}));
  Var gamma = leaf(Tensor::meta({16}));
  Var h = layer_norm(ctx, gelu(ctx, linear(ctx, x, w, b)), gamma, b);  // b used twice
  backward(ctx, cross_entropy(ctx, h, Tensor::meta({4})));
  for (const Var& v : {x, w, b, gamma}) {
    ASSERT_TRUE(v.grad().defined());
    EXPECT_TRUE(v.grad().is_meta());
    EXPECT_EQ(v.grad().shape(), v.shape());
  }
}

TEST(Meta, ShapeErrorsAreRaisedOnMetaToo) {
  Context ctx(cpu_kernels());
  expect_shape_error([&] { matmul(ctx, constant(Tensor::meta({2, 3})), constant(Tensor::meta({4, 2}))); },
                     {"matmul", "[2,3]", "[4,2]"});
}

// ---------------------------------------------------------------------------------------------
// backward reads inputs through their Vars

TEST(Backward, ReadsInputsAtBackwardTimeThroughTheirVars) {
  Context ctx(cpu_kernels());
  Var x = leaf(Tensor::from_values({2}, {1, 2}));
  Var w = leaf(Tensor::from_values({2}, {3, 4}));
  Var loss = sum(ctx, mul(ctx, x, w));
  w.mutable_value() = Tensor::from_values({2}, {30, 40});  // an engine re-fetching w before backward
  backward(ctx, loss);
  EXPECT_EQ(values_of(x.grad()), (Values{30, 40}));
}

TEST(Backward, AnInputThatChangedShapeSinceForwardRaisesNamingTheOp) {
  Context ctx(cpu_kernels());
  Var x = leaf(Tensor::from_values({1, 3}, {1, 2, 3}));
  Var w = leaf(Tensor::zeros({2, 3}));
  Var loss = sum(ctx, linear(ctx, x, w, Var()));
  w.mutable_value() = Tensor::zeros({0});  // released to an empty placeholder, never fetched again
  try {
    backward(ctx, loss);
    FAIL() << "expected CorrectnessError";
  } catch (const CorrectnessError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("linear backward"), std::string::npos) << message;
    EXPECT_NE(message.find("f32[0]"), std::string::npos) << message;
    EXPECT_NE(message.find("[2,3]"), std::string::npos) << message;
  }
}

// ---------------------------------------------------------------------------------------------
// kernels that no op reaches

TEST(CpuKernels, AdamWStepMatchesTheHandComputedUpdate) {
  Tensor param = Tensor::from_values({1}, {1.0f});
  Tensor exp_avg = Tensor::zeros({1}), exp_avg_sq = Tensor::zeros({1});
  AdamWHyper hyper;
  hyper.lr = 0.1f;
  hyper.weight_decay = 0.1f;
  cpu_kernels().adamw(param, Tensor::from_values({1}, {0.5f}), exp_avg, exp_avg_sq, hyper);
  // Decay: 1 * (1 - 0.01) = 0.99. m = 0.05, v = 0.00025; bias-corrected 0.5 and 0.25, so the step
  // is 0.1 * 0.5 / (0.5 + 1e-8).
  EXPECT_NEAR(param.item(), 0.99f - 0.1f * 0.5f / (0.5f + 1e-8f), 1e-6f);
  EXPECT_NEAR(exp_avg.item(), 0.05f, 1e-7f);
  // 1 - 0.999f is 0.00099999 in float, hence the looser bound on v.
  EXPECT_NEAR(exp_avg_sq.item(), 0.00025f, 1e-8f);
}

TEST(CpuKernels, MatmulAccumulatesWithBetaAndAnEmptyInnerDimOnlyScales) {
  Tensor out = Tensor::from_values({1, 1}, {3});
  cpu_kernels().matmul(Tensor::from_values({1, 2}, {1, 2}), false, Tensor::from_values({2, 1}, {3, 4}), false, out,
                       1, 1, 1, 2, true, 1.0f);
  EXPECT_EQ(out.item(), 14.0f);
  Tensor empty_inner = Tensor::from_values({1, 1}, {3});
  cpu_kernels().matmul(Tensor::zeros({1, 0}), false, Tensor::zeros({0, 1}), false, empty_inner, 1, 1, 1, 0, true, 2.0f);
  EXPECT_EQ(empty_inner.item(), 6.0f);
  Tensor overwritten = Tensor::from_values({1, 1}, {std::nanf("")});
  cpu_kernels().matmul(Tensor::zeros({1, 0}), false, Tensor::zeros({0, 1}), false, overwritten, 1, 1, 1, 0, true, 0.0f);
  EXPECT_EQ(overwritten.item(), 0.0f);
}

TEST(CpuKernels, SumOfSquaresIsExactForSmallIntegers) {
  EXPECT_EQ(cpu_kernels().sum_of_squares(Tensor::from_values({4}, {1, -2, 3, 4})), 30.0);
  EXPECT_EQ(cpu_kernels().sum_of_squares(Tensor::zeros({0})), 0.0);
}

TEST(CpuKernels, SumToShapeReducesBroadcastDimsOfAnyRank) {
  Tensor out = Tensor::zeros({2, 1, 3});
  cpu_kernels().sum_to_shape(ramp({4, 2, 5, 3}), out);
  const Tensor in = ramp({4, 2, 5, 3});
  Values expected(6, 0.0f);
  for (int64_t i = 0; i < in.numel(); ++i) expected[((i / 15) % 2) * 3 + i % 3] += in.data()[i];
  expect_close(out, expected);
}

}  // namespace
}  // namespace zero3
