// Gradient averaging, accumulation, the canonical norm, clipping and AdamW.
#include "core/training/optimizer.h"

#include <algorithm>
#include <cmath>

#include "core/base/errors.h"
#include "core/base/math_bugs.h"

namespace zero3 {

OptimizerSlot make_optimizer_slot(Kernels& kernels, const Tensor& initial_values) {
  OptimizerSlot slot;
  slot.master = cast(kernels, initial_values, DType::f32);
  slot.exp_avg = Tensor::zeros(initial_values.shape(), DType::f32, initial_values.device());
  slot.exp_avg_sq = Tensor::zeros(initial_values.shape(), DType::f32, initial_values.device());
  return slot;
}

std::vector<float> largest_gradient_bounds(const OptimizerSlot& slot, float beta2) {
  std::vector<float> bounds;
  if (!slot.exp_avg_sq.defined() || slot.exp_avg_sq.is_meta()) return bounds;
  const float weight_of_a_step = std::max(1.0f - beta2, 1e-12f);
  for (float v : slot.exp_avg_sq.to_floats()) bounds.push_back(std::sqrt(v / weight_of_a_step));
  return bounds;
}

void accumulate_average(Kernels& kernels, Tensor& accum, const Tensor& summed, int world) {
  ZERO3_CHECK(accum.numel() == summed.numel(), describe(accum) + " vs " + describe(summed));
  if (accum.is_meta()) return;  // shape-only replay: nothing to add
  if (world == 1 && summed.dtype() == DType::f32) {
    kernels.add_into(accum, summed.reshape(accum.shape()));  // x * 1.0f is x: the same bits, one pass fewer
    return;
  }
  Tensor averaged = device_uninitialized(kernels, summed.shape(), DType::f32);
  kernels.scale(summed, 1.0f / static_cast<float>(world), averaged);
  kernels.add_into(accum, averaged.reshape(accum.shape()));
}

void finish_accumulation(Kernels& kernels, Tensor& accum, int64_t gradient_accumulation_steps) {
  if (gradient_accumulation_steps == 1 || accum.is_meta()) return;
  kernels.scale(accum, 1.0f / static_cast<float>(gradient_accumulation_steps), accum);
}

double sum_of_squares(std::span<const float> values) {
  double total = 0.0;
  for (float value : values) total += static_cast<double>(value) * static_cast<double>(value);
  return total;
}

float clip_coefficient(float grad_norm, float max_norm) {
  if (max_norm <= 0.0f) return 1.0f;
  const float norm = math_bug_on(MathBug::clip_norm_squared) ? grad_norm * grad_norm : grad_norm;
  if (norm <= max_norm && !math_bug_on(MathBug::clip_coefficient_unclamped)) return 1.0f;
  return max_norm / (norm + 1e-6f);
}

AdamWCoefficients adamw_coefficients(const AdamWHyper& hyper, int64_t step) {
  ZERO3_CHECK(step >= 1, "AdamW step " + std::to_string(step) + " (steps count from 1)");
  const bool off_by_one = math_bug_on(MathBug::adamw_bias_correction_off_by_one);
  const double exponent = static_cast<double>(off_by_one ? step + 1 : step);
  const float bias_correction1 = static_cast<float>(1.0 - std::pow(static_cast<double>(hyper.beta1), exponent));
  // Under adamw_decay_in_gradient the decay leaves the kernel's decoupled step and joins the
  // gradient in adamw_update, whose callers pass it these coefficients and nothing else: `decay`
  // then carries 1 - weight_decay, from which adamw_update takes the L2 coefficient.
  const bool decay_in_gradient = math_bug_on(MathBug::adamw_decay_in_gradient);
  return {.beta1 = hyper.beta1,
          .beta2 = hyper.beta2,
          .eps = hyper.eps,
          .decay = decay_in_gradient ? 1.0f - hyper.weight_decay : 1.0f - hyper.lr * hyper.weight_decay,
          .step_size = hyper.lr / bias_correction1,
          .bias_correction2_sqrt =
              static_cast<float>(std::sqrt(1.0 - std::pow(static_cast<double>(hyper.beta2), exponent)))};
}

namespace {

// Math bug adamw_decay_in_gradient: Adam with an L2 penalty, grad + weight_decay * weight after
// clipping (torch.optim.Adam's order), and no decoupled decay. adamw_coefficients put
// 1 - weight_decay in `decay`.
void adam_l2_update(Kernels& kernels, OptimizerSlot& slot, const Tensor& grad, float clip,
                    const AdamWCoefficients& coefficients) {
  const float weight_decay = 1.0f - coefficients.decay;
  Tensor penalized = device_uninitialized(kernels, slot.master.shape(), DType::f32);
  kernels.scale(grad.reshape(slot.master.shape()), clip, penalized);
  Tensor penalty = device_uninitialized(kernels, slot.master.shape(), DType::f32);
  kernels.scale(slot.master, weight_decay, penalty);
  kernels.add_into(penalized, penalty);
  AdamWCoefficients adam = coefficients;
  adam.decay = 1.0f;
  kernels.adamw(slot.master, penalized, slot.exp_avg, slot.exp_avg_sq, adam);
}

}  // namespace

void adamw_update(Kernels& kernels, OptimizerSlot& slot, const Tensor& grad, float clip,
                  const AdamWCoefficients& coefficients) {
  if (slot.master.numel() == 0 || slot.master.is_meta()) return;
  if (math_bug_on(MathBug::adamw_decay_in_gradient)) return adam_l2_update(kernels, slot, grad, clip, coefficients);
  if (clip == 1.0f) {
    kernels.adamw(slot.master, grad, slot.exp_avg, slot.exp_avg_sq, coefficients);
    return;
  }
  Tensor clipped = device_uninitialized(kernels, grad.shape(), DType::f32);
  kernels.scale(grad, clip, clipped);
  kernels.adamw(slot.master, clipped, slot.exp_avg, slot.exp_avg_sq, coefficients);
}

}  // namespace zero3
