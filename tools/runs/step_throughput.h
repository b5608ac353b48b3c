// Tokens and model FLOPs per optimizer step: the tokens/s and model FLOPs utilisation (MFU) that
// `zero3 train` prints each step and `zero3 bench step --backend cuda` reports.
//
//   const StepThroughput throughput = step_throughput(options, config, built, rank.peak_flops);
//   double mfu = throughput.flops_per_step / seconds_per_step / throughput.peak_flops;
#pragma once
#include "core/models/model_zoo.h"
#include "core/training/train_config.h"
#include "tools/runs/train_options.h"

namespace zero3 {

// Tokens (or examples, for models without a sequence) per optimizer step over all options.ranks
// ranks, and the model FLOPs they cost (PaLM's count: 6 per parameter per token, plus
// 12 * layers * width * context for attention).
struct StepThroughput {
  double tokens_per_step = 0.0;
  double flops_per_step = 0.0;
  double peak_flops = 0.0;  // of the device, all ranks together; 0 where unknown (no MFU printed)
};

StepThroughput step_throughput(const TrainOptions& options, const TrainConfig& config, const BuiltModel& built,
                               double peak_flops_per_rank);

}  // namespace zero3
