// The single-process reference trainer and the DDP reference (see the header).
#include "core/training/replicated_trainer.h"

#include <cmath>

#include "core/autograd/autograd.h"
#include "core/base/errors.h"
#include "core/sharding/partition.h"
#include "core/training/checkpoint.h"

namespace zero3 {

ReplicatedTrainer::ReplicatedTrainer(Model& model, const TrainConfig& config, ReplicatedOptions options)
    : model_(model), config_(config), options_(options) {
  if (options_.comm) options_.global_ranks = options_.comm->world();
  for (const Parameter* param : model_.parameters()) {
    ZERO3_CHECK(param->data.defined() && !param->data.is_meta(), "initialise '" + param->name() + "' before training");
    slots_.push_back(make_optimizer_slot(param->data));
  }
  refresh_compute_copies();
}

StepStats ReplicatedTrainer::train_step(Context& ctx, const DataSource& data, int64_t step) {
  ctx.set_step(step);
  grad_accum_.clear();
  for (const Parameter* param : model_.parameters()) grad_accum_.push_back(Tensor::zeros(param->shape()));

  double loss_total = 0.0;
  for (int64_t micro = 0; micro < config_.gradient_accumulation_steps; ++micro) {
    loss_total += forward_backward(ctx, data, step, micro);
    reduce_gradients(ctx, step);
  }
  for (Tensor& accum : grad_accum_) finish_accumulation(ctx.kernels(), accum, config_.gradient_accumulation_steps);

  StepStats stats;
  stats.step = step;
  stats.loss = loss_total / static_cast<double>(config_.gradient_accumulation_steps);
  if (options_.comm) {
    // Every rank reports the same loss: the mean over ranks, summed in rank order.
    Tensor loss = Tensor::scalar(static_cast<float>(stats.loss));
    options_.comm->all_reduce(loss, ReduceOp::sum, {.module = "", .params = {}, .step = step, .phase = "loss"});
    stats.loss = loss.item() / static_cast<double>(world());
  }
  stats.grad_norm = global_grad_norm();
  stats.clip = clip_coefficient(stats.grad_norm, config_.gradient_clipping);
  const AdamWCoefficients coefficients = adamw_coefficients(config_.adamw, step + 1);
  for (size_t id = 0; id < slots_.size(); ++id) {
    adamw_update(ctx.kernels(), slots_[id], grad_accum_[id], stats.clip, coefficients);
  }
  refresh_compute_copies();
  return stats;
}

std::vector<OptimizerSlot> ReplicatedTrainer::checkpoint_shards() const {
  return shard_state(slots_, world(), rank());
}

void ReplicatedTrainer::load_state(const std::vector<OptimizerSlot>& slots) {
  ZERO3_CHECK(slots.size() == slots_.size(), "one optimizer slot per parameter");
  for (const Parameter* param : model_.parameters()) {
    const OptimizerSlot& loaded = slots[static_cast<size_t>(param->id())];
    for (const Tensor* value : {&loaded.master, &loaded.exp_avg, &loaded.exp_avg_sq}) {
      ZERO3_CHECK(value->numel() == param->numel(), "loaded state of '" + param->name() + "' must be full size");
    }
    // Copies: the DDP ranks of one process may load from the same tensors.
    slots_[static_cast<size_t>(param->id())] = {loaded.master.clone().reshape(param->shape()),
                                                loaded.exp_avg.clone().reshape(param->shape()),
                                                loaded.exp_avg_sq.clone().reshape(param->shape())};
  }
  refresh_compute_copies();
}

double ReplicatedTrainer::forward_backward(Context& ctx, const DataSource& data, int64_t step, int64_t micro) {
  ctx.begin_micro_step();
  const int64_t batch_size = options_.comm ? config_.micro_batch_size
                                           : config_.micro_batch_size * options_.global_ranks;
  const Batch batch = data.batch(step, micro, rank(), world(), batch_size);
  Var loss = model_.loss(ctx, batch);
  const double loss_value = loss.value().item();
  backward(ctx, loss);
  return loss_value;
}

void ReplicatedTrainer::reduce_gradients(Context& ctx, int64_t step) {
  // Backward left every used parameter's full gradient; they are all alive until reduced here.
  int64_t grad_bytes = 0;
  for (const Parameter* param : model_.parameters()) {
    const Tensor grad = ctx.param_grad(*param);
    if (grad.defined()) grad_bytes += grad.bytes();
  }
  if (options_.allocator && grad_bytes > 0) options_.allocator->acquire(MemoryCategory::grad, grad_bytes, "gradients");
  for (Parameter* param : model_.parameters()) {
    // An unused parameter contributes zeros, so every rank issues the same collectives.
    Tensor grad = ctx.param_grad(*param);
    Tensor summed = grad.defined() ? grad.to_dtype(DType::f32) : Tensor::zeros(param->shape());
    if (options_.comm) {
      options_.comm->all_reduce(summed, ReduceOp::sum,
                                {.module = param->owner().name(), .params = {param->name()}, .step = step,
                                 .phase = "backward"});
    }
    accumulate_average(ctx.kernels(), grad_accum_[param->id()], summed, world());
  }
  if (options_.allocator && grad_bytes > 0) options_.allocator->release(MemoryCategory::grad, grad_bytes);
}

float ReplicatedTrainer::global_grad_norm() const {
  // The canonical norm (optimizer.h): one f32 partial per rank of the world, added in rank order.
  float total = 0.0f;
  for (int rank = 0; rank < world(); ++rank) {
    double partial = 0.0;
    for (const Tensor& grad : grad_accum_) {
      const ShardRange range = shard_range(grad.numel(), world(), rank);
      partial += sum_of_squares(grad.values().subspan(range.begin, range.owned()));
    }
    total += static_cast<float>(partial);
  }
  return std::sqrt(total);
}

void ReplicatedTrainer::refresh_compute_copies() {
  const DType compute = config_.bf16 ? DType::bf16 : DType::f32;
  for (Parameter* param : model_.parameters()) param->data = slots_[param->id()].master.to_dtype(compute);
}

}  // namespace zero3
