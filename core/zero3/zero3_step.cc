// The ZeRO-3 engine's training step: gradient readiness, bucketed reduce-scatter ordered by id,
// the canonical norm from shard partials, and AdamW on f32 master shards (zero3_engine.h).
#include <algorithm>
#include <cmath>

#include "core/autograd/autograd.h"
#include "core/sharding/bucket_layout.h"
#include "core/base/errors.h"
#include "core/base/stopwatch.h"
#include "core/nn/module.h"
#include "core/zero3/zero3_engine.h"
#include "core/zero3/zero3_engine_state.h"

namespace zero3 {

StepStats Zero3Engine::train_step(Context& ctx, const DataSource& data, int64_t step) {
  // The phases' wall clock (step_stats.h's PhaseTimes): consecutive laps, one clock read at each
  // boundary; recompute and offload are what their running totals grew by in the step.
  const Stopwatch step_watch;
  Stopwatch lap = step_watch;  // the first lap starts with the step
  PhaseTimes phases;
  const double recompute_before = ctx.recompute_seconds();
  const double offload_before = offload_seconds_;
  begin_step(ctx, step);
  for (int64_t micro = 0; micro < config_.gradient_accumulation_steps; ++micro) {
    begin_micro_step(ctx);
    const Batch batch = data.batch(step, micro, comm_.rank(), comm_.world(), config_.micro_batch_size);
    Var loss = model_.loss(ctx, batch);
    record_micro_loss(ctx, loss.value());
    phases.forward_s += lap.lap_seconds();
    begin_backward();
    backward(ctx, loss);
    end_micro_step(ctx);
    phases.backward_s += lap.lap_seconds();
  }
  StepStats stats = end_step(ctx);
  phases.optimizer_s = lap.lap_seconds();
  phases.recompute_s = ctx.recompute_seconds() - recompute_before;
  phases.offload_s = offload_seconds_ - offload_before;
  phases.step_s = step_watch.seconds();
  stats.phases = phases;
  return stats;
}

void Zero3Engine::begin_step(Context& ctx, int64_t step) {
  enter_call(EngineCall::begin_step);
  step_ = step;
  ctx.set_step(step);
  trace_.begin_step();
  // The step's losses stay on the device until end_step averages them; counted like activations,
  // which they are (forward outputs kept past the forward), so every resident byte is counted.
  micro_losses_ = Tensor::zeros({config_.gradient_accumulation_steps}, DType::f32, device_);
  allocator_.acquire(MemoryCategory::activation, micro_losses_.bytes(), "micro-step losses");
  micro_losses_recorded_ = 0;
}

void Zero3Engine::record_micro_loss(Context& ctx, const Tensor& loss) {
  enter_call(EngineCall::record_micro_loss);
  ZERO3_CHECK(micro_losses_recorded_ < micro_losses_.numel(), "more micro-step losses than accumulation steps");
  if (!loss.is_meta() && !micro_losses_.is_meta()) {
    ctx.kernels().copy_segments(loss, micro_losses_, {{.from = 0, .to = micro_losses_recorded_, .count = 1}});
  }
  ++micro_losses_recorded_;
}

void Zero3Engine::begin_micro_step(Context& ctx) {
  enter_call(EngineCall::begin_micro_step);
  ctx.begin_micro_step();
}

void Zero3Engine::begin_backward() { enter_call(EngineCall::begin_backward); }

StepStats Zero3Engine::end_step(Context& ctx) {
  enter_call(EngineCall::end_step);
  const int64_t gas = config_.gradient_accumulation_steps;
  for (auto& state : states_) {
    if (!state->frozen) finish_accumulation(ctx.kernels(), state->grad_shard, gas);
  }
  StepStats stats;
  stats.step = step_;
  // Same arithmetic as the DDP reference: the micro-step mean (summed in double), then the mean
  // over ranks, summed in rank order. A driver that recorded no loss reports 0.
  Tensor loss = Tensor::zeros({}, DType::f32, device_);
  if (!loss.is_meta() && micro_losses_recorded_ > 0) ctx.kernels().average(micro_losses_, loss);
  allocator_.release(MemoryCategory::activation, micro_losses_.bytes());
  micro_losses_ = Tensor();
  comm_.all_reduce(loss, ReduceOp::sum, {.module = "", .params = {}, .step = step_, .phase = "loss"});
  stats.loss = loss.is_meta() ? 0.0 : ctx.kernels().to_host(loss).item() / static_cast<double>(comm_.world());
  stats.grad_norm = global_grad_norm(step_);
  stats.clip = clip_coefficient(stats.grad_norm, config_.gradient_clipping);
  optimizer_step(ctx, step_, stats.clip);
  check_step_boundary();
  phase_ = EnginePhase::between_steps;
  if (observer_) observer_->after_step(*this);
  return stats;
}

void Zero3Engine::note_gradients_ready(Context& ctx, Module& module) {
  const bool last_leaf_pass = is_leaf(module) && ctx.current_invocation() == 0;
  if (last_leaf_pass) leaves_done_.insert(&module);
  auto accessed = accessed_.find({&module, ctx.current_invocation()});
  if (accessed != accessed_.end()) {
    for (ParamState* state : accessed->second) account_full_grad(ctx, *state);
  }
  auto it = uses_.find({&module, ctx.current_invocation()});
  if (it != uses_.end()) {
    for (ParamState* state : it->second) {
      ZERO3_CHECK(state->remaining_grad_uses > 0, "gradient use count of " + state->param->name());
      const bool leaf_pending = state->leaf && leaves_done_.count(state->leaf) == 0;
      if (--state->remaining_grad_uses == 0 && !state->reduced && !leaf_pending) reduce_bucket_.push_back(state);
    }
  }
  // Backward runs in reverse, so a leaf's invocation 0 is the last of its backward passes.
  if (last_leaf_pass) {
    // Parameters of the leaf that this rank did not use (an expert no row was routed to) are
    // ready now too, with zero gradients, so every rank fills the same buckets.
    for (Parameter* param : module.all_parameters()) {
      ParamState* state = states_[param->id()].get();
      if (state->frozen) continue;
      // The bug: only hooks that fired reduce; a peer that routed rows here reduces this expert alone.
      if (bugs_.on(Bug::unused_params_skipped) && !ctx.param_grad(*param).defined()) continue;
      const bool queued = std::find(reduce_bucket_.begin(), reduce_bucket_.end(), state) != reduce_bucket_.end();
      if (!queued && !state->reduced && state->remaining_grad_uses == 0) reduce_bucket_.push_back(state);
    }
  }
  int64_t bucket_elements = 0;
  for (const ParamState* state : reduce_bucket_) bucket_elements += state->numel;
  if (bucket_elements >= config_.zero.reduce_bucket_elements) {
    if (bugs_.on(Bug::bucket_exact_size_skipped) && bucket_elements == config_.zero.reduce_bucket_elements) {
      for (ParamState* state : reduce_bucket_) state->reduced = true;  // the bug: dropped, never reduced
      reduce_bucket_.clear();
      return;
    }
    flush_reduce_bucket(ctx);
  }
}

void Zero3Engine::account_full_grad(Context& ctx, ParamState& state) {
  if (state.grad_bytes > 0) return;  // a later use adds into the same gradient
  const Tensor grad = ctx.param_grad(*state.param);
  if (!grad.defined() || grad.bytes() == 0) return;
  state.grad_bytes = grad.bytes();
  allocator_.acquire(MemoryCategory::grad, state.grad_bytes, state.param->name());
}

void Zero3Engine::release_full_grad(Context& ctx, ParamState& state) {
  ctx.release_param_grad(*state.param);
  if (state.grad_bytes > 0) allocator_.release(MemoryCategory::grad, state.grad_bytes);
  state.grad_bytes = 0;
}

void Zero3Engine::flush_reduce_bucket(Context& ctx) {
  if (reduce_bucket_.empty()) return;
  order_reduce_bucket_by_id();
  check_reduce_bucket_unreduced();
  const BucketLayout layout = reduce_bucket_layout();
  Tensor world_buffer = pack_reduce_bucket(ctx, layout);
  const Tensor block = reduce_packed_bucket(ctx, layout, world_buffer);
  accumulate_reduced_bucket(ctx, layout, block);
  reduce_bucket_.clear();
}

void Zero3Engine::order_reduce_bucket_by_id() {
  // Every rank lays the bucket out identically whatever order hooks fired in.
  if (bugs_.on(Bug::bucket_order_by_arrival)) return;
  std::sort(reduce_bucket_.begin(), reduce_bucket_.end(),
            [](const ParamState* a, const ParamState* b) { return a->param->id() < b->param->id(); });
}

BucketLayout Zero3Engine::reduce_bucket_layout() const {
  std::vector<BucketEntry> entries;
  for (const ParamState* state : reduce_bucket_) {
    entries.push_back({.param_id = state->param->id(), .numel = state->numel});
  }
  return BucketLayout(entries, shard_comm().world());
}

Tensor Zero3Engine::pack_reduce_bucket(Context& ctx, const BucketLayout& layout) {
  std::vector<Tensor> grads;
  for (const ParamState* state : reduce_bucket_) {
    const Tensor grad = ctx.param_grad(*state->param);
    // Packing only reads the gradients: an f32 one is used as it is, a bf16 one is cast first.
    Tensor f32_grad = !grad.defined() || grad.dtype() == DType::f32 ? grad : cast(ctx.kernels(), grad, DType::f32);
    grads.push_back(f32_grad.defined() ? f32_grad.reshape({state->numel}) : Tensor());
  }
  Tensor world_buffer = Tensor::zeros({layout.block_numel() * shard_comm().world()}, DType::f32, device_);
  const float padding = bugs_.on(Bug::grad_padding_uninitialized) ? uninitialized_padding_value(comm_.rank()) : 0.0f;
  layout.pack_full(ctx.kernels(), grads, world_buffer, padding);
  // Packed into the send buffer, the full gradients are dropped before the collective runs.
  grads.clear();
  for (ParamState* state : reduce_bucket_) release_full_grad(ctx, *state);
  return world_buffer;
}

Tensor Zero3Engine::reduce_packed_bucket(Context& ctx, const BucketLayout& layout, Tensor& world_buffer) {
  Communicator& shard_comm = this->shard_comm();
  Tensor block = Tensor::zeros({layout.block_numel()}, DType::f32, device_);
  CallSite site = call_site("", reduce_bucket_, "backward");
  if (config_.zero.stage == 1) {
    // Stage 1 all-reduces the whole bucket, as DDP does, and keeps this rank's block of the sum:
    // the same additions in the same rank order as the reduce-scatter, so the same bits.
    site.purpose = "gradient all-reduce";
    comm_.all_reduce(world_buffer, ReduceOp::sum, site);
    if (!world_buffer.is_meta()) ctx.kernels().slice(world_buffer, 0, layout.block_numel() * comm_.rank(), block);
  } else {
    site.purpose = across_blocks_ ? "block reduce-scatter" : "gradient reduce-scatter";
    shard_comm.reduce_scatter(world_buffer, block, ReduceOp::sum, site);
    // HSDP: each block summed its own ranks; the blocks' sums are added in block order.
    if (across_blocks_ && !bugs_.on(Bug::hsdp_cross_block_skipped)) {
      site.purpose = "across-block all-reduce";
      across_blocks_->all_reduce(block, ReduceOp::sum, site);
    }
  }
  counters_.reduce_scatters++;
  return block;
}

void Zero3Engine::accumulate_reduced_bucket(Context& ctx, const BucketLayout& layout, const Tensor& block) {
  // The mean over every rank's data, whichever tree summed it.
  const int ranks_averaged = bugs_.on(Bug::hsdp_average_over_block) ? shard_world() : comm_.world();
  for (size_t i = 0; i < reduce_bucket_.size(); ++i) {
    ParamState& state = *reduce_bucket_[i];
    accumulate_average(ctx.kernels(), state.grad_shard, layout.shard_of(ctx.kernels(), block, i), ranks_averaged);
    if (bugs_.on(Bug::gas_scale_twice)) finish_accumulation(ctx.kernels(), state.grad_shard, config_.gradient_accumulation_steps);
    state.reduced = true;
  }
}

void Zero3Engine::end_micro_step(Context& ctx) {
  enter_call(EngineCall::end_micro_step);
  flush_reduce_bucket(ctx);
  // Whatever was not reduced yet — unused parameters above all — is reduced now, in id order:
  // with zeros where there is no gradient, so every rank issues the same collectives.
  int64_t bucket_elements = 0;
  for (auto& state : states_) {
    if (state->reduced || state->frozen) continue;
    if (bugs_.on(Bug::unused_params_skipped) && !ctx.param_grad(*state->param).defined()) continue;
    reduce_bucket_.push_back(state.get());
    bucket_elements += state->numel;
    if (bucket_elements >= config_.zero.reduce_bucket_elements) {
      flush_reduce_bucket(ctx);
      bucket_elements = 0;
    }
  }
  flush_reduce_bucket(ctx);
  Module& root = model_.root();
  for (auto& state : states_) {
    // Gathers prefetched for what follows this micro-step are completed and dropped.
    if (state->status == ParamStatus::inflight) wait_for(ctx, *state);
    if (state->status == ParamStatus::available && !state->persistent) release(ctx, *state, root);
  }
  // No module running, no use left, no gradient unreduced, nothing in flight: asserted, not reset.
  check_micro_step_boundary(ctx);
  // What readiness counted this micro-step starts again from zero in the next one.
  for (auto& state : states_) {
    state->reduced = false;
    state->remaining_grad_uses = 0;
  }
  uses_.clear();
  accessed_.clear();
  leaves_done_.clear();
}

float Zero3Engine::global_grad_norm(int64_t step) {
  // The canonical norm (optimizer.h): this rank's partial over its shards in id order, rounded
  // to f32, then one all-reduce that adds the partials in rank order.
  Tensor total = Tensor::zeros({}, DType::f32, device_);
  if (!total.is_meta()) {
    std::vector<TensorRange> parts;
    // A frozen parameter has no gradient: it would add only zeros, which leave the sum's bits as they are.
    for (const auto& state : states_) {
      if (!state->frozen) parts.push_back({&state->grad_shard, 0, state->grad_shard.numel()});
    }
    kernels_.sum_of_squares_into(parts, total, 0);
  }
  // Under HSDP every block holds the whole gradient: its G partials make the norm.
  shard_comm().all_reduce(total, ReduceOp::sum, {.module = "", .params = {}, .step = step, .phase = "grad_norm"});
  // Clipping needs the norm on the host: the second and last host sync of the step.
  return total.is_meta() ? 0.0f : std::sqrt(kernels_.to_host(total).item());
}

void Zero3Engine::optimizer_step(Context& ctx, int64_t step, float clip) {
  const int64_t adamw_step = step + 1;  // AdamW counts from 1 (its bias corrections); steps count from 0
  const AdamWCoefficients coefficients = adamw_coefficients(config_.adamw, adamw_step);
  std::vector<ParamState*> persistent;
  for (auto& state : states_) {
    // hpZ: the secondary shards hold this step's values; the next step gathers the new ones.
    if (!bugs_.on(Bug::hpz_secondary_kept_after_step)) drop_secondary(*state);
    if (state->frozen) continue;  // its value, and so any gathered copy, stays as it is
    // Offloaded, the gradient shard goes down and AdamW runs on the host (the same kernels' math).
    const Tensor grad = offloads_optimizer() ? down(state->grad_shard) : state->grad_shard;
    const Stopwatch adamw_watch;
    adamw_update(optimizer_kernels(), state->slot, grad, clip, coefficients);
    if (offloads_optimizer()) offload_seconds_ += adamw_watch.seconds();  // the host AdamW is offload's
    if (!(offloads_optimizer() && bugs_.on(Bug::offload_update_not_copied_up))) refresh_shard(*state);
    if (!state->grad_shard.is_meta()) ctx.kernels().fill(state->grad_shard, 0.0f);
    if (state->persistent && state->status == ParamStatus::available && !bugs_.on(Bug::stale_replica_after_step)) {
      release(ctx, *state, model_.root());  // its full value is stale now
      persistent.push_back(state.get());
    }
  }
  // Persistent parameters stay gathered between steps: gather their new values once.
  if (!persistent.empty()) {
    issue_gather(model_.root(), persistent);
    complete_gather(ctx, *pending_.back());
  }
}

std::vector<OptimizerSlot> Zero3Engine::gather_full_state(int64_t step) {
  enter_call(EngineCall::gather_full_state);
  std::vector<OptimizerSlot> fulls;
  for (const auto& state : states_) {
    Communicator& shard_comm = this->shard_comm();
    const BucketLayout layout({{.param_id = state->param->id(), .numel = state->numel}}, shard_comm.world());
    auto gather = [&](const Tensor& stored) {
      // Offloaded state is copied up for the collective (outside the step: not counted).
      const Tensor shard = offloads_optimizer() ? kernels_.to_device(stored) : stored;
      Tensor world_buffer = Tensor::zeros({shard.numel() * shard_comm.world()}, DType::f32, device_);
      shard_comm.all_gather(shard, world_buffer,
                       {.module = "", .params = {state->param->name()}, .step = step, .phase = "gather_state"});
      Tensor full = Tensor::zeros({state->numel}, DType::f32, device_);
      layout.unpack_full(kernels_, world_buffer, 0, full);
      // Host copies: full states feed checkpoints and comparisons, outside the step.
      return (full.is_meta() ? full : kernels_.to_host(full)).reshape(state->param->shape());
    };
    // No moments kept for a frozen one: zeros, as the reference's for a parameter it never updates.
    fulls.push_back(state->frozen ? frozen_slot(gather(state->slot.master))
                                  : OptimizerSlot{gather(state->slot.master), gather(state->slot.exp_avg),
                                                  gather(state->slot.exp_avg_sq)});
  }
  return fulls;
}

}  // namespace zero3
