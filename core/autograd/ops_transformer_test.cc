// layer_norm, rms_norm, embedding, causal_softmax and causal_self_attention against hand values and naive loops.
#include "core/autograd/ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor/allocator.h"
#include "core/tensor/kernels.h"
#include "core/autograd/ops_test_support.h"

namespace zero3 {
namespace {

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

TEST(RmsNorm, DividesAKnownRowByItsRootMeanSquareThenScales) {
  Context ctx(cpu_kernels());
  const Var x = constant(Tensor::from_values({2, 2}, {3, 4, -1, 1}));
  const Var gamma = constant(Tensor::from_values({2}, {1, 2}));
  // Mean squares 12.5 and 1; the mean is not subtracted.
  const float first = 1.0f / std::sqrt(12.5f + 1e-5f), second = 1.0f / std::sqrt(1.0f + 1e-5f);
  expect_close(rms_norm(ctx, x, gamma).value(), {3 * first, 8 * first, -second, 2 * second});
}

TEST(RmsNorm, GradientsMatchIncludingEmptyRowsAndSizeOneOrZeroWidth) {
  for (const Shape& shape : {Shape{3, 4}, Shape{2, 2, 4}, Shape{4}, Shape{0, 4}, Shape{3, 1}, Shape{2, 0}}) {
    SCOPED_TRACE(shape_str(shape));
    expect_gradients_match([](Context& ctx, const std::vector<Var>& in) {
      return weighted_sum(ctx, rms_norm(ctx, in[0], in[1]));
    }, {ramp(shape, 10.0f), ramp({shape.back()}, 1.0f, 1)});
  }
}

TEST(RmsNorm, GammaOfTheWrongWidthRaisesNamingTheShapes) {
  Context ctx(cpu_kernels());
  expect_shape_error([&] { rms_norm(ctx, constant(Tensor::zeros({2, 4})), constant(Tensor::zeros({3}))); },
                     {"rms_norm", "[2,4]", "[3]"});
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

// The op keeps q, k, v and the probabilities for backward besides its output, and the tape's
// activation figure says so (the composition it replaced kept nine copies of [B, T, C] and three
// score tensors).
TEST(CausalSelfAttention, TheTapeCountsTheOutputAndWhatBackwardKeeps) {
  CountingAllocator memory;
  Context ctx(cpu_kernels());
  ctx.tape().count_activations(&memory);
  const Var qkv(ramp({2, 3, 12}, 4.0f), /*requires_grad=*/true);
  causal_self_attention(ctx, qkv, 2);
  const int64_t out = 2 * 3 * 4, split = 3 * out, probabilities = 2 * 2 * 3 * 3;
  EXPECT_EQ(memory.current_bytes(MemoryCategory::activation), 4 * (out + split + probabilities));
}

TEST(CausalSelfAttention, ChannelsThatDoNotSplitRaiseNamingTheShape) {
  Context ctx(cpu_kernels());
  expect_shape_error([&] { causal_self_attention(ctx, constant(Tensor::zeros({1, 2, 7})), 1); },
                     {"causal_self_attention", "[1,2,7]"});
  expect_shape_error([&] { causal_self_attention(ctx, constant(Tensor::zeros({1, 2, 6})), 4); },
                     {"causal_self_attention", "4 heads"});
}

}  // namespace
}  // namespace zero3
