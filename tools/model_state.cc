// The model-state line (model_state.h).
#include "tools/model_state.h"

#include <cstdio>
#include <string>

#include "core/base/errors.h"
#include "core/sharding/partition.h"

namespace zero3 {

// The analytic count per shard element: the compute-dtype parameter shard, the f32 gradient shard
// and 12 bytes of f32 master and AdamW moments; a frozen parameter's holds only the shard and the
// 4-byte master. Stage 1 holds every trained parameter's whole f32 gradient instead of a shard.
// The ZeRO paper's (2 + 2 + K) * psi / W with K = 12 assumes a 2-byte gradient.
nlohmann::json print_model_state(const TrainOptions& options, const TrainConfig& config, const Model& model,
                                 const std::array<int64_t, kMemoryCategoryCount>& peak_bytes) {
  const int64_t compute_bytes = config.bf16 ? 2 : 4;
  int64_t shard_elements = 0;
  int64_t frozen_elements = 0;
  int64_t unsharded_grad_elements = 0;  // stage 1: the rest of each whole gradient
  for (const Parameter* param : model.parameters()) {
    const int64_t elements = shard_numel(param->numel(), options.ranks);
    shard_elements += elements;
    if (!param->requires_grad()) frozen_elements += elements;
    if (param->requires_grad() && config.zero.stage == 1) unsharded_grad_elements += param->numel() - elements;
  }
  const int64_t analytic =
      (compute_bytes + 4 + 12) * shard_elements - (4 + 8) * frozen_elements + 4 * unsharded_grad_elements;
  const int64_t measured = peak_bytes[static_cast<size_t>(MemoryCategory::param_shard)] +
                           peak_bytes[static_cast<size_t>(MemoryCategory::grad_shard)] +
                           peak_bytes[static_cast<size_t>(MemoryCategory::optimizer_state)];
  const double paper = 16.0 * static_cast<double>(model.parameter_count()) / options.ranks;
  std::printf("model state per rank: %lld bytes measured, %lld analytic (%lld+4+12 bytes x %lld shard elements",
              static_cast<long long>(measured), static_cast<long long>(analytic), static_cast<long long>(compute_bytes),
              static_cast<long long>(shard_elements));
  if (frozen_elements > 0) {
    std::printf(", less 4+8 for each of the %lld frozen ones", static_cast<long long>(frozen_elements));
  }
  if (unsharded_grad_elements > 0) {
    std::printf(", plus 4 for each of the %lld gradient elements stage 1 holds beyond its shards",
                static_cast<long long>(unsharded_grad_elements));
  }
  std::printf("), ZeRO paper (2+2+12)*psi/W = %.0f\n", paper);
  if (measured != analytic) {
    throw CorrectnessError("model-state bytes " + std::to_string(measured) + " differ from the analytic " +
                           std::to_string(analytic));
  }
  return {{"measured_bytes", measured}, {"analytic_bytes", analytic}, {"zero_paper_bytes", paper}};
}

}  // namespace zero3
