// The ZeRO-3 engine's hierarchical sharding (zero3_engine.h, top): the groups it splits the world
// into, and hpZ's secondary shards.
#include <algorithm>

#include "core/sharding/bucket_layout.h"
#include "core/sharding/partition.h"
#include "core/zero3/zero3_engine.h"
#include "core/zero3/zero3_engine_state.h"

namespace zero3 {

void Zero3Engine::split_into_groups() {
  check_group_sizes(config_, comm_.world(), "the engine's config");
  const CallSite setup{.module = "", .params = {}, .step = -1, .phase = "setup"};
  // A block of the whole world is flat ZeRO-3: nothing to split, the same collectives as ever.
  BlockGroups hsdp = split_into_blocks(comm_, config_.zero.shard_ranks(comm_.world()), setup);
  shard_block_ = std::move(hsdp.block);
  across_blocks_ = std::move(hsdp.across);
  if (config_.zero.keeps_secondary(comm_.world())) {
    hpz_block_ = comm_.split_block(config_.zero.hpz_group_size, setup);
  }
}

void Zero3Engine::keep_secondary(ParamState& state) {
  // A persistent parameter stays gathered: backward never gathers it, so it needs no second copy.
  if (!hpz_block_ || state.persistent || state.secondary.defined()) return;
  const int64_t elements = shard_numel(state.numel, hpz_block_->world());
  state.secondary = make_shard(kernels_, state.full.reshape({state.numel}), hpz_block_->world(), hpz_block_->rank());
  allocator_.acquire(MemoryCategory::secondary_param_shard, elements * dtype_bytes(compute_dtype_),
                     state.param->name());
}

bool Zero3Engine::gathers_from_secondary(const std::vector<ParamState*>& params) const {
  // Backward's gathers (a checkpointed module's recompute too) stay inside the block, as ZeRO++'s
  // do; a bucket with a parameter not gathered yet this step takes the world's gather.
  if (!hpz_block_ || phase_ != EnginePhase::backward) return false;
  return std::all_of(params.begin(), params.end(), [](const ParamState* state) { return state->secondary.defined(); });
}

void Zero3Engine::drop_secondary(ParamState& state) {
  if (!state.secondary.defined()) return;
  state.secondary = Tensor();
  allocator_.release(MemoryCategory::secondary_param_shard,
                     shard_numel(state.numel, hpz_block_->world()) * dtype_bytes(compute_dtype_));
}

}  // namespace zero3
