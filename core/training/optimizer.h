// The optimizer step shared by the reference trainer, the DDP reference and the ZeRO-3 engine.
// Each of them calls exactly these functions in the same order, so that a sharded run can equal
// its unsharded reference bit for bit:
//   1. per micro-step:  accumulate_average(accum, summed_over_ranks, world)
//   2. after the last:  finish_accumulation(accum, gradient_accumulation_steps)
//   3. global norm:     the canonical norm below, from per-rank partial sums of squares
//   4. clip + AdamW:    adamw_update(slot, accum, clip_coefficient(norm, max_norm),
//                                    adamw_coefficients(hyper, step))
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "core/tensor/kernels.h"
#include "core/tensor/tensor.h"

namespace zero3 {

// AdamW's hyperparameters (PyTorch's torch.optim.AdamW: decoupled weight decay, bias correction).
struct AdamWHyper {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
};
// The kernel's scalars for optimizer step `step` (1-based), bias corrections computed in double.
AdamWCoefficients adamw_coefficients(const AdamWHyper& hyper, int64_t step);

// f32 master weights and AdamW moments for one flat slice (a whole parameter, or a shard of one).
struct OptimizerSlot {
  Tensor master;
  Tensor exp_avg;
  Tensor exp_avg_sq;
};
// An f32 copy and zero moments, on the kernels' device (meta stays meta).
OptimizerSlot make_optimizer_slot(Kernels& kernels, const Tensor& initial_values);
// Per element, a bound on the largest gradient AdamW has seen: its second moment is a running mean
// of squared gradients weighing each step's square by at least 1 - beta2, so sqrt(v / (1 - beta2))
// bounds every one. Empty when the slot keeps no moments (a frozen parameter) or they are meta.
// Comparisons use it to skip elements whose gradient was only rounding noise.
std::vector<float> largest_gradient_bounds(const OptimizerSlot& slot, float beta2);

// accum += summed * (1 / world). `summed` is the rank-order sum of one micro-step's gradients.
void accumulate_average(Kernels& kernels, Tensor& accum, const Tensor& summed, int world);
// accum *= 1 / gradient_accumulation_steps (exactly nothing when it is 1).
void finish_accumulation(Kernels& kernels, Tensor& accum, int64_t gradient_accumulation_steps);

// The canonical global gradient norm: each rank r sums the squares of the gradient elements it
// owns (parameters in id order, its shard range of each, in double), rounds that partial to f32,
// and the partials are added in rank order in f32 (the all-reduce). A run at world size W uses
// W partials whether or not it is sharded; under HSDP (shard_group_size G < W) every block holds the
// whole gradient, so the norm is its G partials, added in block-rank order. The kernels compute a partial
// (Kernels::sum_of_squares_into); sum_of_squares is the same sum over host values, for tests.
double sum_of_squares(std::span<const float> values);
float clip_coefficient(float grad_norm, float max_norm);  // 1 when clipping is off or not needed

// Scales the gradient by `clip` and applies AdamW to the slot's master weights.
void adamw_update(Kernels& kernels, OptimizerSlot& slot, const Tensor& grad, float clip,
                  const AdamWCoefficients& coefficients);

}  // namespace zero3
