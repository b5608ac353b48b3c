// The published per-GPU memory estimates that a replay is compared against, for the same total
// parameters Ψ, largest layer and world size W:
//   - the ZeRO paper (Rajbhandari et al. 2020, sec. 3 and 5): mixed-precision Adam holds
//     2Ψ (fp16 parameters) + 2Ψ (fp16 gradients) + KΨ (fp32 master, momentum, variance; K = 12)
//     bytes, and stage 3 partitions all of it: (2 + 2 + K) Ψ / W per device;
//   - DeepSpeed's estimate_zero3_model_states_mem_needs (deepspeed/runtime/zero/stage3.py) with
//     its defaults zero_init=True, additional_buffer_factor=1.5, for its three offload settings.
//
//   DeepSpeedEstimate e = deepspeed_zero3_estimate(175e9, 617e6, /*gpus_per_node=*/8, /*nodes=*/128);
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace zero3 {

inline constexpr int kZeroPaperOptimizerBytesK = 12;

// (2 + 2 + K) * Ψ / W bytes.
double zero_paper_stage3_bytes(int64_t total_params, int world);

struct DeepSpeedEstimate {
  std::string offload;  // "none", "optimizer" (cpu_offload), "optimizer+params" (cpu_offload_params)
  double gpu_bytes = 0.0;
  double cpu_bytes = 0.0;
};

// estimate_zero3_model_states_mem_needs(total_params, largest_layer_params, gpus_per_node, nodes,
// cpu_offload, cpu_offload_params, zero_init=True, additional_buffer_factor=1.5) for
// (False, False), (True, False) and (True, True).
std::vector<DeepSpeedEstimate> deepspeed_zero3_estimates(int64_t total_params, int64_t largest_layer_params,
                                                         int gpus_per_node, int nodes);

}  // namespace zero3
