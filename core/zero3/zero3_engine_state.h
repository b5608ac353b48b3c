// Private to the ZeRO-3 engine (zero3_engine.cc and zero3_step.cc): the per-parameter state and
// the in-flight gathers. Not part of the engine's interface.
#pragma once
#include <memory>
#include <vector>

#include "core/sharding/bucket_layout.h"
#include "core/zero3/zero3_engine.h"

namespace zero3 {

struct Zero3Engine::ParamState {
  Parameter* param = nullptr;
  int64_t numel = 0;
  Tensor shard;            // this rank's partition in the compute dtype, zero padded
  OptimizerSlot slot;      // f32 master shard and AdamW moments
  Tensor grad_shard;       // f32, accumulated over micro-steps
  Tensor full;             // the gathered value, exactly while AVAILABLE (set by move_status only)
  Tensor secondary;        // hpZ: this rank's shard of the gathered value over its block, until the step ends
  ParamStatus status = ParamStatus::not_available;
  bool persistent = false;
  // requires_grad false: gathered like any other, but no gradient, no reduce-scatter and no AdamW
  // moments; its f32 master stays as the value of record (checkpoints, full state).
  bool frozen = false;
  int active_uses = 0;          // module invocations currently running that use it
  int remaining_grad_uses = 0;  // forward uses whose backward has not finished yet
  bool reduced = false;         // its gradient was reduce-scattered this micro-step
  int64_t grad_bytes = 0;       // its full gradient, counted as `grad` from backward to reduction
  const Module* leaf = nullptr;  // the outermost leaf module containing its owner, if any
  PendingGather* pending = nullptr;  // its gather, exactly while INFLIGHT (set by move_status only)
};

// A frozen parameter's slot as checkpoints and full states carry it: its master, and zeros for the
// AdamW moments it never had (shapes only where the master is meta).
inline OptimizerSlot frozen_slot(const Tensor& master) {
  const Tensor zeros = master.is_meta() ? master : Tensor::zeros(master.shape());
  return {master, zeros, zeros};
}

struct Zero3Engine::PendingGather {
  BucketLayout layout;
  std::vector<ParamState*> params;
  Tensor send;
  Tensor world_buffer;
  std::shared_ptr<Work> work;
  bool from_secondary = false;  // hpZ: gathered inside the block from the secondary shards
};

}  // namespace zero3
