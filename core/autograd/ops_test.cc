// What every op in ops.h shares: dtype promotion, shape inference and shape-only backward on meta,
// and backward reading inputs through their Vars. Each op has its own ops_*_test.cc.
#include "core/autograd/ops.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "core/base/errors.h"
#include "core/tensor/kernels.h"
#include "core/autograd/ops_test_support.h"

namespace zero3 {
namespace {

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
      {"silu", [&] { return silu(ctx, m({3, 5})); }, {3, 5}},
      {"matmul", [&] { return matmul(ctx, m({2, 7, 3}), m({3, 4})); }, {2, 7, 4}},
      {"linear", [&] { return linear(ctx, m({2, 5, 8}), m({0, 8}), m({0})); }, {2, 5, 0}},
      {"layer_norm", [&] { return layer_norm(ctx, m({2, 6}), m({6}), m({6})); }, {2, 6}},
      {"rms_norm", [&] { return rms_norm(ctx, m({2, 6}), m({6})); }, {2, 6}},
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

}  // namespace
}  // namespace zero3
