// The CPU kernels that no op reaches directly: AdamW, GEMM with beta, sum_of_squares, sum_to_shape.
#include "core/tensor/kernels.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/tensor/tensor_test_support.h"

namespace zero3 {
namespace {

TEST(CpuKernels, AdamWStepMatchesTheHandComputedUpdate) {
  Tensor param = Tensor::from_values({1}, {1.0f});
  Tensor exp_avg = Tensor::zeros({1}), exp_avg_sq = Tensor::zeros({1});
  // Step 1 with lr 0.1, weight decay 0.1, betas (0.9, 0.999): bias corrections 0.1 and sqrt(0.001).
  const AdamWCoefficients coefficients{.beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .decay = 1.0f - 0.1f * 0.1f,
                                       .step_size = 0.1f / (1.0f - 0.9f),
                                       .bias_correction2_sqrt = std::sqrt(1.0f - 0.999f)};
  cpu_kernels().adamw(param, Tensor::from_values({1}, {0.5f}), exp_avg, exp_avg_sq, coefficients);
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
