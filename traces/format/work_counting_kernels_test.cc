// WorkCountingKernels: known shapes give exact counts, every call still computes through the inner
// kernels, and the backward-kernel listener fires for backward kernels only.
#include <gtest/gtest.h>

#include "traces/format/work_counting_kernels.h"

namespace zero3 {
namespace {

TEST(WorkCountingKernels, ALinearLayersProductCountsTwoMnkFlopsAndNoBytes) {
  WorkCountingKernels counting(cpu_kernels());
  const Tensor x = Tensor::full({3, 5}, 1.0f), w = Tensor::full({4, 5}, 2.0f);
  Tensor y = Tensor::zeros({3, 4});
  counting.matmul(x, false, w, true, y, 1, 3, 4, 5, false, 0.0f);
  EXPECT_EQ(counting.total().flops, 2.0 * 3 * 4 * 5);
  EXPECT_EQ(counting.total().flops_quadratic, 0.0) << "a weight's product grows with tokens";
  EXPECT_EQ(counting.total().bytes, 0.0);
  EXPECT_EQ(counting.total().calls, 1);
  EXPECT_EQ(y.to_floats()[11], 10.0f) << "the product is still computed by the inner kernels";
}

TEST(WorkCountingKernels, AttentionsPerHeadProductsAndCausalSoftmaxGrowWithTheSquareOfTheSequence) {
  WorkCountingKernels counting(cpu_kernels());
  // Two heads' scores q k^T: [2, 3, 4] x [2, 3, 4]^T -> [2, 3, 3].
  const Tensor q = Tensor::full({2, 3, 4}, 0.5f), k = Tensor::full({2, 3, 4}, 0.25f);
  Tensor scores = Tensor::zeros({2, 3, 3}), probs = Tensor::zeros({2, 3, 3});
  counting.matmul(q, false, k, true, scores, 2, 3, 3, 4, false, 0.0f);
  counting.causal_softmax_forward(scores, probs);
  const KernelWork& work = counting.total();
  EXPECT_EQ(work.flops, 2.0 * 2 * 3 * 3 * 4);
  EXPECT_EQ(work.flops_quadratic, work.flops);
  // Query i sees i + 1 keys: 1 + 2 + 3 exps per head.
  EXPECT_EQ(work.transcendentals, 12.0);
  EXPECT_EQ(work.transcendentals_quadratic, 12.0);
  EXPECT_EQ(work.bytes, 2.0 * 18 * 4);  // scores read, probabilities written, f32
  EXPECT_EQ(work.bytes_quadratic, work.bytes);
  EXPECT_EQ(work.calls, 2);
  EXPECT_FLOAT_EQ(probs.to_floats()[15], 1.0f / 3.0f);  // head 1, query 2, key 0
}

TEST(WorkCountingKernels, MemoryBoundKernelsCountReadAndWrittenBytesInTheirDtypes) {
  WorkCountingKernels counting(cpu_kernels());
  const Tensor a = Tensor::full({2, 3}, 1.0f), b = Tensor::full({3}, 2.0f);
  Tensor sum = Tensor::zeros({2, 3});
  counting.binary(BinaryOp::add, a, b, sum);
  EXPECT_EQ(counting.total().bytes, 24.0 + 12.0 + 24.0);
  KernelWork before = counting.total();
  Tensor gelu = Tensor::zeros({2, 3});
  counting.unary(UnaryOp::gelu, sum, gelu);
  EXPECT_EQ(counting.total().since(before).bytes, 48.0);
  EXPECT_EQ(counting.total().since(before).transcendentals, 6.0) << "one tanh per element";
  before = counting.total();
  Tensor relu = Tensor::zeros({2, 3});
  counting.unary(UnaryOp::relu, sum, relu);
  EXPECT_EQ(counting.total().since(before).transcendentals, 0.0);
  // Three f32 elements into a bf16 buffer: 12 bytes read, 6 written, whatever the buffers' sizes.
  before = counting.total();
  Tensor packed = Tensor::zeros({100}, DType::bf16);
  counting.copy_segments(sum, packed, {{.from = 0, .to = 10, .count = 2}, {.from = 4, .to = 50, .count = 1}});
  EXPECT_EQ(counting.total().since(before).bytes, 18.0);
  EXPECT_EQ(packed.to_floats()[50], 3.0f);
  // Cross-entropy over a vocabulary of 5 for 2 rows: an exp per logit and a log per row.
  before = counting.total();
  const Tensor logits = Tensor::full({2, 5}, 0.5f), targets = Tensor::from_values({2}, {1.0f, 4.0f});
  Tensor loss = Tensor::zeros({}), probs = Tensor::zeros({2, 5});
  counting.cross_entropy_forward(logits, targets, loss, probs);
  EXPECT_EQ(counting.total().since(before).transcendentals, 12.0);
  EXPECT_EQ(counting.total().since(before).bytes, 40.0 + 8.0 + 4.0 + 40.0);
  // AdamW reads the parameter, gradient and both moments and writes all but the gradient.
  before = counting.total();
  Tensor param = Tensor::full({8}, 1.0f), grad = Tensor::full({8}, 0.1f), m = Tensor::zeros({8}), v = Tensor::zeros({8});
  counting.adamw(param, grad, m, v, {});
  EXPECT_EQ(counting.total().since(before).bytes, 7.0 * 32);
  EXPECT_EQ(counting.total().calls, 6);
  EXPECT_EQ(counting.total().flops, 0.0);
}

TEST(WorkCountingKernels, TheBackwardListenerFiresBeforeEachBackwardKernelOnly) {
  WorkCountingKernels counting(cpu_kernels());
  std::vector<int64_t> calls_seen;
  counting.set_before_backward_kernel([&] { calls_seen.push_back(counting.total().calls); });
  const Tensor logits = Tensor::full({2, 5}, 0.5f), targets = Tensor::from_values({2}, {1.0f, 4.0f});
  Tensor loss = Tensor::zeros({}), probs = Tensor::zeros({2, 5}), grad = Tensor::zeros({2, 5});
  counting.cross_entropy_forward(logits, targets, loss, probs);
  counting.cross_entropy_backward(probs, targets, Tensor::scalar(1.0f), grad);
  counting.unary_backward(UnaryOp::gelu, logits, probs, grad);
  EXPECT_EQ(calls_seen, (std::vector<int64_t>{1, 2})) << "called before the backward kernel is counted";
}

}  // namespace
}  // namespace zero3
