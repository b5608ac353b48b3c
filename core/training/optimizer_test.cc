// The shared optimizer arithmetic: averaging, accumulation, the canonical norm and clipping.
#include "core/training/optimizer.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/autograd/autograd.h"
#include "core/base/math_bugs.h"
#include "core/autograd/context.h"
#include "core/models/model_zoo.h"

namespace zero3 {
namespace {

TEST(Optimizer, ClipCoefficientIsOneBelowTheLimitAndScalesAbove) {
  EXPECT_EQ(clip_coefficient(0.5f, 1.0f), 1.0f);
  EXPECT_EQ(clip_coefficient(5.0f, 0.0f), 1.0f);  // clipping off
  EXPECT_NEAR(clip_coefficient(4.0f, 1.0f), 0.25f, 1e-6f);
}

TEST(Optimizer, SumOfSquaresIsExactForSmallIntegers) {
  const float values[] = {1.0f, -2.0f, 3.0f};
  EXPECT_EQ(sum_of_squares(values), 14.0);
}

TEST(Optimizer, AdamWFirstStepMovesEachWeightByLrAgainstTheGradientSign) {
  // With bias correction, AdamW's first step is lr * g / (|g| + eps) = ±lr (weight decay off).
  OptimizerSlot slot = make_optimizer_slot(cpu_kernels(), Tensor::from_values({3}, {1.0f, 1.0f, 1.0f}));
  const Tensor grad = Tensor::from_values({3}, {0.5f, -2.0f, 0.0f});
  AdamWHyper hyper{.lr = 0.1f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.0f};
  adamw_update(cpu_kernels(), slot, grad, 1.0f, adamw_coefficients(hyper, 1));
  EXPECT_NEAR(slot.master.data()[0], 0.9f, 1e-5f);
  EXPECT_NEAR(slot.master.data()[1], 1.1f, 1e-5f);
  EXPECT_NEAR(slot.master.data()[2], 1.0f, 1e-6f);
}

TEST(Optimizer, DecoupledWeightDecayShrinksWeightsWithoutGradient) {
  OptimizerSlot slot = make_optimizer_slot(cpu_kernels(), Tensor::from_values({1}, {2.0f}));
  AdamWHyper hyper{.lr = 0.1f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.5f};
  adamw_update(cpu_kernels(), slot, Tensor::zeros({1}), 1.0f, adamw_coefficients(hyper, 1));
  EXPECT_NEAR(slot.master.data()[0], 2.0f * (1.0f - 0.1f * 0.5f), 1e-6f);
}

// The planted bugs of core/base/math_bugs.h: each changes the step it names, and leaving its scope
// restores the right math.
float one_adamw_step(float weight, float grad, const AdamWHyper& hyper) {
  OptimizerSlot slot = make_optimizer_slot(cpu_kernels(), Tensor::from_values({1}, {weight}));
  adamw_update(cpu_kernels(), slot, Tensor::from_values({1}, {grad}), 1.0f, adamw_coefficients(hyper, 1));
  return slot.master.data()[0];
}

TEST(OptimizerMathBugs, BiasCorrectionOffByOneCorrectsTheFirstStepAsTheSecond) {
  const AdamWHyper hyper{.lr = 0.1f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.0f};
  const float right = one_adamw_step(1.0f, 0.5f, hyper);
  float planted = 0.0f;
  {
    const ScopedMathBug bug(MathBug::adamw_bias_correction_off_by_one);
    planted = one_adamw_step(1.0f, 0.5f, hyper);
  }
  // One step's moments, m = (1 - b1) g and v = (1 - b2) g^2, corrected by 1 - b^2 instead of 1 - b.
  const double b1 = hyper.beta1, b2 = hyper.beta2, g = 0.5;
  const double corrected_m = (1.0 - b1) * g / (1.0 - b1 * b1);
  const double corrected_v = (1.0 - b2) * g * g / (1.0 - b2 * b2);
  EXPECT_NEAR(planted, 1.0 - hyper.lr * corrected_m / std::sqrt(corrected_v), 1e-5);
  EXPECT_NEAR(right, 1.0f - hyper.lr, 1e-5f);
  EXPECT_GT(std::abs(planted - right), 1e-2f);
  EXPECT_EQ(one_adamw_step(1.0f, 0.5f, hyper), right);
}

TEST(OptimizerMathBugs, DecayInGradientStepsByLrInsteadOfShrinkingTheWeight) {
  // No gradient: AdamW shrinks the weight by lr * wd of itself (4 -> 3.8); Adam + L2 takes the decay
  // as the gradient and, normalising it, steps by lr (4 -> 3.9).
  const AdamWHyper hyper{.lr = 0.1f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.5f};
  const float right = one_adamw_step(4.0f, 0.0f, hyper);
  EXPECT_NEAR(right, 4.0f * (1.0f - hyper.lr * hyper.weight_decay), 1e-6f);
  AdamWHyper no_decay = hyper;
  no_decay.weight_decay = 0.0f;
  const float right_without_decay = one_adamw_step(4.0f, 0.5f, no_decay);
  {
    const ScopedMathBug bug(MathBug::adamw_decay_in_gradient);
    EXPECT_NEAR(one_adamw_step(4.0f, 0.0f, hyper), 4.0f - hyper.lr, 1e-5f);
    // Without weight decay the penalty is zero and Adam is AdamW, to the bit.
    EXPECT_EQ(one_adamw_step(4.0f, 0.5f, no_decay), right_without_decay);
  }
  EXPECT_EQ(one_adamw_step(4.0f, 0.0f, hyper), right);
}

TEST(OptimizerMathBugs, UnclampedClipScalesSmallGradientsUp) {
  {
    const ScopedMathBug bug(MathBug::clip_coefficient_unclamped);
    EXPECT_NEAR(clip_coefficient(0.5f, 1.0f), 2.0f, 1e-5f);
    EXPECT_NEAR(clip_coefficient(4.0f, 1.0f), 0.25f, 1e-6f);  // above the limit it was right already
    EXPECT_EQ(clip_coefficient(0.5f, 0.0f), 1.0f);              // clipping off stays off
  }
  EXPECT_EQ(clip_coefficient(0.5f, 1.0f), 1.0f);
}

TEST(OptimizerMathBugs, SquaredNormClipsByTheSumOfSquares) {
  {
    const ScopedMathBug bug(MathBug::clip_norm_squared);
    EXPECT_NEAR(clip_coefficient(4.0f, 1.0f), 1.0f / 16.0f, 1e-6f);
    EXPECT_NEAR(clip_coefficient(0.9f, 0.5f), 0.5f / 0.81f, 1e-5f);
    EXPECT_EQ(clip_coefficient(0.6f, 0.5f), 1.0f);  // 0.36 is under the limit: a needed clip skipped
  }
  EXPECT_NEAR(clip_coefficient(0.9f, 0.5f), 0.5f / 0.9f, 1e-5f);
  EXPECT_NEAR(clip_coefficient(0.6f, 0.5f), 0.5f / 0.6f, 1e-5f);
}

TEST(Optimizer, AccumulatedAverageOverMicroStepsEqualsTheMean) {
  Tensor accum = Tensor::zeros({2});
  accumulate_average(cpu_kernels(), accum, Tensor::from_values({2}, {4.0f, 8.0f}), 4);
  accumulate_average(cpu_kernels(), accum, Tensor::from_values({2}, {0.0f, 8.0f}), 4);
  finish_accumulation(cpu_kernels(), accum, 2);
  EXPECT_EQ(accum.data()[0], 0.5f);
  EXPECT_EQ(accum.data()[1], 2.0f);
}

// The Markov data is learnable and AdamW learns it: gpt-tiny ends well below the unigram entropy.
TEST(AdamW, TrainsGptTinyClearlyBelowTheUnigramEntropyOfTheMarkovData) {
  BuiltModel built = build_model("gpt-tiny", {.seed = 7, .data_file = ""});
  built.model->initialize(7);
  std::vector<Tensor> exp_avg, exp_avg_sq;
  for (const Parameter* param : built.model->parameters()) {
    exp_avg.push_back(Tensor::zeros(param->shape()));
    exp_avg_sq.push_back(Tensor::zeros(param->shape()));
  }
  float loss = 0.0f;
  for (int64_t step = 0; step < 200; ++step) {
    Context ctx(cpu_kernels());
    const Var loss_var = built.model->loss(ctx, built.data->batch(step, 0, 0, 1, 8));
    backward(ctx, loss_var);
    loss = loss_var.value().item();
    const AdamWCoefficients coefficients = adamw_coefficients({.lr = 1e-2f}, step + 1);
    for (size_t i = 0; i < built.model->parameters().size(); ++i) {
      Parameter& param = *built.model->parameters()[i];
      const Tensor grad = ctx.param_grad(param);
      cpu_kernels().adamw(param.data, grad, exp_avg[i], exp_avg_sq[i], coefficients);
    }
  }
  EXPECT_LT(loss, *built.data->unigram_entropy_nats() - 1.0) << built.data->description();
}

}  // namespace
}  // namespace zero3
