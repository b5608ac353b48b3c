// The CPU kernels that no op reaches directly: AdamW, GEMM with beta, sums of squares, segments, scalars, host copies.
#include "core/tensor/kernels.h"
#include "core/tensor/cpu_kernels_internal.h"

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

TEST(CpuKernels, SumOfSquaresIntoSumsTheRangesOfEveryPartIntoOneElement) {
  const Tensor a = Tensor::from_values({4}, {1, -2, 3, 4});
  const Tensor b = Tensor::from_values({2}, {5, 6}, DType::bf16);
  const Tensor empty = Tensor::zeros({0});
  Tensor out = Tensor::zeros({3});
  cpu_kernels().sum_of_squares_into({{&a, 1, 3}, {&b, 0, 2}, {&empty, 0, 0}}, out, 1);
  EXPECT_EQ(out.to_floats(), (std::vector<float>{0.0f, 4 + 9 + 25 + 36, 0.0f}));
  cpu_kernels().sum_of_squares_into({{&a, 0, 4}}, out, 2, 4.0);  // the mse form: a mean of squares
  EXPECT_EQ(out.to_floats()[2], 7.5f);
}

TEST(CpuKernels, RowArgmaxTakesTheLowestIndexOnTies) {
  const Tensor x = Tensor::from_values({3, 3}, {1, 5, 5, -1, -2, -3, 0, 0, 7}, DType::bf16);
  Tensor out = Tensor::zeros({3});
  cpu_kernels().row_argmax(x, out);
  EXPECT_EQ(out.to_floats(), (std::vector<float>{1, 0, 2}));
}

TEST(CpuKernels, CopySegmentsMovesRunsAndCastsBetweenDtypes) {
  const Tensor in = Tensor::from_values({5}, {1.0f, 2.0f, 3.0f, 1.00390625f, 5.0f});
  Tensor out = Tensor::zeros({6}, DType::bf16);
  cpu_kernels().copy_segments(in, out, {{.from = 0, .to = 4, .count = 2}, {.from = 3, .to = 0, .count = 2}});
  // 1.00390625 is halfway between two bf16 values and rounds to the even one, 1.0.
  EXPECT_EQ(out.to_floats(), (std::vector<float>{1.0f, 5.0f, 0.0f, 0.0f, 1.0f, 2.0f}));
  cpu_kernels().fill_range(out, 2, 2, 9.0f);
  EXPECT_EQ(out.to_floats(), (std::vector<float>{1.0f, 5.0f, 9.0f, 9.0f, 1.0f, 2.0f}));
}

TEST(CpuKernels, ScalarDrivenFillAndScaleUseTheDeviceScalar) {
  const Tensor seed = Tensor::scalar(3.0f);
  Tensor filled = Tensor::zeros({2});
  cpu_kernels().fill_from_scalar(filled, seed, 2.0f, 4.0f);
  EXPECT_EQ(filled.to_floats(), (std::vector<float>{1.5f, 1.5f}));
  Tensor scaled = Tensor::zeros({2});
  cpu_kernels().scale_by_scalar(Tensor::from_values({2}, {1.0f, -2.0f}), seed, 1.0f, 1.0f, scaled);
  EXPECT_EQ(scaled.to_floats(), (std::vector<float>{3.0f, -6.0f}));
}

TEST(CpuKernels, HostCopiesAreCountedAndCheckTheirOperands) {
  CpuKernels kernels(Device::cpu, "cpu");
  const Tensor device = Tensor::from_values({2}, {1.0f, 2.0f});
  const Tensor host = kernels.to_host(device);
  EXPECT_EQ(host.to_floats(), device.to_floats());
  EXPECT_EQ(kernels.host_syncs(), 1);
  Tensor wrong_dtype = Tensor::zeros({2}, DType::bf16);
  EXPECT_THROW(kernels.copy_to_host(device, wrong_dtype), std::logic_error);
  EXPECT_EQ(kernels.host_syncs(), 1);
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
