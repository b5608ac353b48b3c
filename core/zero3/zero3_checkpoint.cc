// The ZeRO-3 engine's side of checkpoints: handing out this rank's shards and taking loaded ones
// back (zero3_engine.h, "checkpoints"; the files themselves are core/training/checkpoint.h's business).
#include "core/base/errors.h"
#include "core/sharding/partition.h"
#include "core/training/checkpoint.h"
#include "core/zero3/zero3_engine.h"
#include "core/zero3/zero3_engine_state.h"

namespace zero3 {

std::vector<OptimizerSlot> Zero3Engine::checkpoint_shards(int64_t step) {
  if (!shard_block_) return shard_state();
  return zero3::shard_state(gather_full_state(step), comm_.world(), comm_.rank());
}

std::vector<OptimizerSlot> Zero3Engine::shard_state() const {
  std::vector<OptimizerSlot> shards;
  for (const auto& state : states_) {
    const auto host = [&](const Tensor& tensor) {
      return tensor.is_meta() ? tensor : optimizer_kernels().to_host(tensor);
    };
    const Tensor master = host(state->slot.master);
    // The file keeps three shards per parameter; a frozen one's moments are zeros.
    shards.push_back(state->frozen ? frozen_slot(master)
                                   : OptimizerSlot{master, host(state->slot.exp_avg), host(state->slot.exp_avg_sq)});
  }
  return shards;
}

void Zero3Engine::load_shard_state(Context& ctx, const std::vector<OptimizerSlot>& shards) {
  enter_call(EngineCall::load_shard_state);
  ZERO3_CHECK(shards.size() == states_.size(), "one optimizer slot per parameter");
  ZERO3_CHECK(pending_.empty(), "load_shard_state between steps only: a gather is in flight");
  const EngineCounters before = counters_;  // placing loaded state is not a step's traffic
  for (size_t id = 0; id < states_.size(); ++id) {
    ParamState& state = *states_[id];
    const int64_t ps = shard_numel(state.numel, shard_world());
    const OptimizerSlot& loaded = shards[id];
    ZERO3_CHECK(loaded.master.numel() == ps && loaded.exp_avg.numel() == ps && loaded.exp_avg_sq.numel() == ps,
                "loaded shard of '" + state.param->name() + "' must hold shard_numel elements");
    // Copies onto the device: several ranks of one process may load from the same host tensors.
    // Offloaded, the optimizer state is copied into host memory instead.
    Kernels& optimizer = optimizer_kernels();
    if (state.frozen) {
      state.slot.master = optimizer.copy_to_device(loaded.master.reshape({ps}));
    } else {
      state.slot = {optimizer.copy_to_device(loaded.master.reshape({ps})),
                    optimizer.copy_to_device(loaded.exp_avg.reshape({ps})),
                    optimizer.copy_to_device(loaded.exp_avg_sq.reshape({ps}))};
    }
    if (bugs_.on(Bug::resume_without_optimizer_state) && !state.frozen) {
      state.slot.exp_avg = Tensor::zeros({ps}, DType::f32, optimizer.device());
      state.slot.exp_avg_sq = Tensor::zeros({ps}, DType::f32, optimizer.device());
    }
    refresh_shard(state);
    ZERO3_CHECK(state.status != ParamStatus::inflight, "'" + state.param->name() + "' is in flight");
    // A gathered copy holds the old value; releasing it makes the next use gather the new one.
    if (state.status == ParamStatus::available) release(ctx, state, model_.root());
    drop_secondary(state);
  }
  counters_.device_to_host_bytes = before.device_to_host_bytes;
  counters_.host_to_device_bytes = before.host_to_device_bytes;
}

void Zero3Engine::load_full_state(Context& ctx, const std::vector<OptimizerSlot>& full) {
  load_shard_state(ctx, zero3::shard_state(full, shard_world(), shard_comm().rank()));
}

}  // namespace zero3
