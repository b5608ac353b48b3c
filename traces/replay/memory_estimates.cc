// The ZeRO paper's formula and DeepSpeed's ZeRO-3 estimator, transcribed (memory_estimates.h).
#include "traces/replay/memory_estimates.h"

#include <cmath>

namespace zero3 {

double zero_paper_stage3_bytes(int64_t total_params, int world) {
  return (2.0 + 2.0 + kZeroPaperOptimizerBytesK) * static_cast<double>(total_params) / world;
}

std::vector<DeepSpeedEstimate> deepspeed_zero3_estimates(int64_t total_params, int64_t largest_layer_params,
                                                         int gpus_per_node, int nodes) {
  constexpr double kAdditionalBufferFactor = 1.5;  // DeepSpeed's default
  const double params = static_cast<double>(total_params);
  const double total_gpus = static_cast<double>(gpus_per_node) * nodes;
  const double gpus_factor = 1.0 / nodes;
  // DeepSpeed budgets the largest layer's parameters gathered at 4 bytes per element.
  const double largest_layer_bytes = 4.0 * static_cast<double>(largest_layer_params);
  std::vector<DeepSpeedEstimate> out;
  // No offload: 18 bytes per parameter partitioned over every GPU (DeepSpeed's int() truncation kept).
  out.push_back({"none", largest_layer_bytes + std::floor(18.0 * params / total_gpus),
                 static_cast<double>(largest_layer_params) * 4.0 * gpus_per_node * kAdditionalBufferFactor});
  out.push_back({"optimizer", largest_layer_bytes + std::floor(2.0 * params / total_gpus),
                 params * 16.0 * gpus_factor * kAdditionalBufferFactor});
  out.push_back({"optimizer+params", largest_layer_bytes, params * 18.0 * gpus_factor * kAdditionalBufferFactor});
  return out;
}

}  // namespace zero3
