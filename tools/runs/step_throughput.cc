// Tokens and model FLOPs per step (step_throughput.h).
#include "tools/runs/step_throughput.h"

namespace zero3 {

StepThroughput step_throughput(const TrainOptions& options, const TrainConfig& config, const BuiltModel& built,
                               double peak_flops_per_rank) {
  const nlohmann::json& spec = built.spec;
  const bool sequence = spec.value("kind", "") == "gpt";
  const double context = sequence ? spec.value("context", 1.0) : 1.0;
  const double tokens = static_cast<double>(config.micro_batch_size) * context *
                        static_cast<double>(config.gradient_accumulation_steps) * options.ranks;
  double flops_per_token = 6.0 * static_cast<double>(built.model->parameter_count());
  if (sequence) flops_per_token += 12.0 * spec.value("layers", 0.0) * spec.value("width", 0.0) * context;
  return {.tokens_per_step = tokens, .flops_per_step = tokens * flops_per_token,
          .peak_flops = peak_flops_per_rank * options.ranks};
}

}  // namespace zero3
