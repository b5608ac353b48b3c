// The single-process oracle: a distributed run (DDP or ZeRO-3) against the reference trainer on
// one process, fed the global batch at once. Not bitwise — the reference sums the batch in one
// piece where the ranks sum per rank and then across ranks — so it holds within a per-dtype
// tolerance. It is the oracle that can catch what DDP and ZeRO-3 share on purpose (the 1/W and
// 1/GAS arithmetic, the reduction), which the bitwise DDP comparison cannot.
//
//   const OracleDifferences found = differences_to_single_process(options, run.steps, run.final_state);
//   const std::string verdict = oracle_violations(found, single_process_tolerance(config.bf16));
//   if (!verdict.empty()) throw CorrectnessError(verdict);   // exit 2
#pragma once
#include <string>
#include <vector>

#include "core/training/optimizer.h"
#include "core/training/step_stats.h"
#include "sim/distributed_training.h"

namespace zero3 {

// Largest differences allowed. The losses and gradient norms are the sensitive figures: under
// AdamW a parameter whose gradient is near zero may step +lr on one side and -lr on the other, so
// the parameter bound is loose in f32 and absent in bf16 (0: not checked).
struct OracleTolerance {
  double loss_relative = 0.0;
  double grad_norm_relative = 0.0;
  double parameter_absolute = 0.0;
};
OracleTolerance single_process_tolerance(bool bf16);

struct OracleDifferences {
  double loss_relative = 0.0;  // max over steps of |a - b| / max(|b|, 1e-12)
  int64_t loss_step = -1;      // where the max was
  double grad_norm_relative = 0.0;
  int64_t grad_norm_step = -1;
  double parameter_absolute = 0.0;  // max over every master weight
  std::string parameter{};          // whose
};

// Compares steps and state with one another (the first are the distributed run's). A master weight
// element whose gradient was never above kOracleGradientNoise, by the reference's AdamW second moment
// (largest_gradient_bounds, core/training/optimizer.h), is not compared: its true gradient is
// 0 (a key bias, which only shifts each row of attention scores), and AdamW turns either side's
// rounding into steps of up to lr in directions that differ. Elements without moments (frozen
// parameters, which must not move) are all compared.
constexpr double kOracleGradientNoise = 1e-5;
OracleDifferences oracle_differences(const std::vector<StepStats>& steps, const std::vector<OptimizerSlot>& state,
                                     const std::vector<StepStats>& reference_steps,
                                     const std::vector<OptimizerSlot>& reference_state,
                                     const std::vector<std::string>& param_names, float adamw_beta2);
// Trains the single-process reference for `options` (same model, seed, data, config, steps, on
// options.world ranks' worth of data; from options.load_checkpoint when set) on cpu and compares.
OracleDifferences differences_to_single_process(const DistributedRunOptions& options,
                                                const DistributedRunResult& run);
// "" within tolerance; else one line per figure beyond it, naming the figure, where, and the bound.
std::string oracle_violations(const OracleDifferences& found, const OracleTolerance& tolerance);

}  // namespace zero3
