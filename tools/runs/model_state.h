// The model-state line every distributed run prints: a rank's measured shard bytes beside the
// analytic count for this engine and the ZeRO paper's (2+2+12)*psi/W.
#pragma once
#include <array>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "core/nn/model.h"
#include "core/tensor/allocator.h"
#include "tools/runs/train_options.h"

namespace zero3 {

// `peak_bytes`: the rank's peaks by category (param_shard, grad_shard and optimizer_state count).
// Prints one line and returns it for the report; CorrectnessError when measured and analytic differ.
nlohmann::json print_model_state(const TrainOptions& options, const TrainConfig& config, const Model& model,
                                 const std::array<int64_t, kMemoryCategoryCount>& peak_bytes);

}  // namespace zero3
