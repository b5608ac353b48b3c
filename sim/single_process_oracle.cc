// The single-process oracle (single_process_oracle.h).
#include "sim/single_process_oracle.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

#include "core/tensor/allocator.h"
#include "core/training/checkpoint.h"
#include "core/zero3/rank_program.h"

namespace zero3 {

namespace {

double relative_difference(double a, double b) { return std::fabs(a - b) / std::max(std::fabs(b), 1e-12); }

std::string format(const char* pattern, double a, double b) {
  char text[96];
  std::snprintf(text, sizeof(text), pattern, a, b);
  return text;
}

}  // namespace

OracleTolerance single_process_tolerance(bool bf16) {
  // Measured with zero3 train --check (gpt-tiny, moe-tiny, mlp-tiny; W 2, 5, 8; GAS 1 and 3; 10
  // steps): f32 losses within 1.2e-7 relative, grad norms 2.1e-7, parameters 4.3e-6 absolute; bf16
  // losses within 4.0e-3, grad norms 1.04e-2, parameters up to 2.6e-2 (about 2 lr per step: sign
  // flips). The bounds sit 5x (bf16) to 50x (f32) above that; a gradient scaled by 2 misses either.
  if (bf16) return {.loss_relative = 2e-2, .grad_norm_relative = 5e-2, .parameter_absolute = 0.0};
  return {.loss_relative = 1e-5, .grad_norm_relative = 1e-5, .parameter_absolute = 1e-4};
}

OracleDifferences oracle_differences(const std::vector<StepStats>& steps, const std::vector<OptimizerSlot>& state,
                                     const std::vector<StepStats>& reference_steps,
                                     const std::vector<OptimizerSlot>& reference_state,
                                     const std::vector<std::string>& param_names, float adamw_beta2) {
  OracleDifferences found;
  const size_t step_count = std::min(steps.size(), reference_steps.size());
  for (size_t i = 0; i < step_count; ++i) {
    const double loss = relative_difference(steps[i].loss, reference_steps[i].loss);
    if (loss > found.loss_relative || found.loss_step < 0) {
      found.loss_relative = loss;
      found.loss_step = steps[i].step;
    }
    const double norm = relative_difference(steps[i].grad_norm, reference_steps[i].grad_norm);
    if (norm > found.grad_norm_relative || found.grad_norm_step < 0) {
      found.grad_norm_relative = norm;
      found.grad_norm_step = steps[i].step;
    }
  }
  for (size_t id = 0; id < std::min(state.size(), reference_state.size()); ++id) {
    const std::vector<float> a = state[id].master.to_floats();
    const std::vector<float> b = reference_state[id].master.to_floats();
    const std::vector<float> gradient = largest_gradient_bounds(reference_state[id], adamw_beta2);
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
      if (i < gradient.size() && gradient[i] < kOracleGradientNoise) continue;
      const double difference = std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i]));
      if (difference > found.parameter_absolute) {
        found.parameter_absolute = difference;
        found.parameter = (id < param_names.size() ? param_names[id] : "param " + std::to_string(id)) + "[" +
                          std::to_string(i) + "]";
      }
    }
  }
  return found;
}

OracleDifferences differences_to_single_process(const DistributedRunOptions& options,
                                                const DistributedRunResult& run) {
  BuiltModel built = build_run_model(options);
  initialize_model(built, options.seed);
  std::optional<Checkpoint> resume;
  if (!options.load_checkpoint.empty()) resume = load_checkpoint(options.load_checkpoint, *built.model);
  CountingAllocator memory;
  const RankProgramResult reference = run_rank_program(
      {.comm = nullptr, .allocator = memory, .kernels = cpu_kernels()}, built,
      {.config = options.config, .seed = options.seed, .steps = options.steps, .global_ranks = options.world,
       .resume = resume ? &*resume : nullptr});
  return oracle_differences(run.steps, run.final_state, reference.steps, reference.final_state,
                            built.model->parameter_names(), options.config.adamw.beta2);
}

std::string oracle_violations(const OracleDifferences& found, const OracleTolerance& tolerance) {
  std::string violations;
  if (found.loss_relative > tolerance.loss_relative) {
    violations += "loss at step " + std::to_string(found.loss_step) +
                  format(" differs by %.3g relative (tolerance %.3g)\n", found.loss_relative, tolerance.loss_relative);
  }
  if (found.grad_norm_relative > tolerance.grad_norm_relative) {
    violations += "grad norm at step " + std::to_string(found.grad_norm_step) +
                  format(" differs by %.3g relative (tolerance %.3g)\n", found.grad_norm_relative,
                         tolerance.grad_norm_relative);
  }
  if (tolerance.parameter_absolute > 0.0 && found.parameter_absolute > tolerance.parameter_absolute) {
    violations += "parameter " + found.parameter +
                  format(" differs by %.3g (tolerance %.3g)\n", found.parameter_absolute, tolerance.parameter_absolute);
  }
  return violations;
}

}  // namespace zero3
