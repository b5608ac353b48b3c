// The model-state line (model_state.h).
#include "tools/runs/model_state.h"

#include <cstdio>
#include <string>

#include "core/base/errors.h"
#include "core/sharding/partition.h"

namespace zero3 {

// The analytic count per shard element: the compute-dtype parameter shard, the f32 gradient shard
// and 12 bytes of f32 master and AdamW moments; a frozen parameter's holds only the shard and the
// 4-byte master. Stage 1 holds every trained parameter's whole f32 gradient instead of a shard.
// The ZeRO paper's (2 + 2 + K) * psi / W with K = 12 assumes a 2-byte gradient. Offloaded parts
// count the same bytes in host memory. HSDP shards over its block of G ranks instead of the world.
nlohmann::json print_model_state(const TrainOptions& options, const TrainConfig& config, const Model& model,
                                 const std::array<int64_t, kMemoryCategoryCount>& peak_bytes) {
  const int64_t compute_bytes = config.bf16 ? 2 : 4;
  int64_t shard_elements = 0;
  int64_t frozen_elements = 0;
  int64_t unsharded_grad_elements = 0;  // stage 1: the rest of each whole gradient
  const int shard_ranks = config.zero.stage == 3 ? config.zero.shard_ranks(options.ranks) : options.ranks;
  for (const Parameter* param : model.parameters()) {
    const int64_t elements = shard_numel(param->numel(), shard_ranks);
    shard_elements += elements;
    if (!param->requires_grad()) frozen_elements += elements;
    if (param->requires_grad() && config.zero.stage == 1) unsharded_grad_elements += param->numel() - elements;
  }
  // By place: offload moves the optimizer state (and under offload_param the shard) to the host.
  const int64_t param_part = compute_bytes * shard_elements;
  const int64_t grad_part = 4 * (shard_elements - frozen_elements) + 4 * unsharded_grad_elements;
  const int64_t optimizer_part = 12 * shard_elements - 8 * frozen_elements;
  const bool host_params = config.zero.offload_param == OffloadDevice::cpu;
  const bool host_optimizer = config.zero.offload_optimizer == OffloadDevice::cpu;
  const int64_t analytic = param_part + grad_part + optimizer_part;
  const int64_t analytic_host = (host_params ? param_part : 0) + (host_optimizer ? optimizer_part : 0);
  auto peak = [&](MemoryCategory category) { return peak_bytes[static_cast<size_t>(category)]; };
  const int64_t measured_host = peak(MemoryCategory::host_param_shard) + peak(MemoryCategory::host_optimizer_state);
  const int64_t measured = peak(MemoryCategory::param_shard) + peak(MemoryCategory::grad_shard) +
                           peak(MemoryCategory::optimizer_state) + measured_host;
  const double paper = 16.0 * static_cast<double>(model.parameter_count()) / shard_ranks;
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
  std::printf("), ZeRO paper (2+2+12)*psi/%s = %.0f\n", shard_ranks == options.ranks ? "W" : "G", paper);
  // hpZ's secondary copy is not model state (it lives from a gather to the step's end), but it is
  // what hpZ costs in memory: said beside it.
  if (peak(MemoryCategory::secondary_param_shard) > 0) {
    std::printf("  hpZ secondary copy: %lld bytes at most (a block shard of every parameter gathered in the step)\n",
                static_cast<long long>(peak(MemoryCategory::secondary_param_shard)));
  }
  if (host_params || host_optimizer) {
    std::printf("  offloaded to host memory: %lld bytes measured, %lld analytic (%s); on the device: %lld\n",
                static_cast<long long>(measured_host), static_cast<long long>(analytic_host),
                host_params && host_optimizer ? "parameter shards, master weights and moments"
                : host_params                 ? "parameter shards"
                                              : "master weights and moments",
                static_cast<long long>(measured - measured_host));
  }
  if (measured != analytic || measured_host != analytic_host) {
    throw CorrectnessError("model-state bytes " + std::to_string(measured) + " (host " + std::to_string(measured_host) +
                           ") differ from the analytic " + std::to_string(analytic) + " (host " +
                           std::to_string(analytic_host) + ")");
  }
  return {{"measured_bytes", measured}, {"analytic_bytes", analytic}, {"zero_paper_bytes", paper},
          {"host_bytes", measured_host}, {"device_bytes", measured - measured_host}};
}

}  // namespace zero3
