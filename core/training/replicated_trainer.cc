// The single-process reference trainer and the DDP reference (see the header).
#include "core/training/replicated_trainer.h"

#include <cmath>

#include "core/autograd/autograd.h"
#include "core/base/errors.h"
#include "core/sharding/partition.h"
#include "core/training/checkpoint.h"

namespace zero3 {

namespace {

// PyTorch DDP's bucket assignment (compute_bucket_assignment_by_size) in id order: a parameter
// joins the open bucket, which closes once it holds `bucket_bytes` of f32 gradients. With 0 every
// parameter closes its own bucket.
std::vector<std::vector<const Parameter*>> allreduce_buckets(const std::vector<Parameter*>& params,
                                                             int64_t bucket_bytes) {
  std::vector<std::vector<const Parameter*>> buckets;
  std::vector<const Parameter*> open;
  int64_t open_bytes = 0;
  for (const Parameter* param : params) {
    if (!param->requires_grad()) continue;  // frozen: no gradient to reduce
    open.push_back(param);
    open_bytes += param->numel() * dtype_bytes(DType::f32);
    if (open_bytes >= bucket_bytes) {
      buckets.push_back(std::move(open));
      open.clear();
      open_bytes = 0;
    }
  }
  if (!open.empty()) buckets.push_back(std::move(open));
  return buckets;
}

}  // namespace

ReplicatedTrainer::ReplicatedTrainer(Model& model, const TrainConfig& config, ReplicatedOptions options)
    : model_(model), config_(config), options_(options),
      kernels_(options.kernels ? *options.kernels : cpu_kernels()) {
  if (options_.comm) options_.global_ranks = options_.comm->world();
  if (options_.comm) {
    BlockGroups tree = split_into_blocks(*options_.comm, config_.zero.shard_ranks(options_.comm->world()),
                                         {.module = "", .params = {}, .step = -1, .phase = "setup"});
    block_ = std::move(tree.block);
    across_blocks_ = std::move(tree.across);
  }
  for (const Parameter* param : model_.parameters()) {
    ZERO3_CHECK(param->data.defined() && !param->data.is_meta(), "initialise '" + param->name() + "' before training");
    // The model was initialised on the host; the trainer's copy lives on its device.
    slots_.push_back(make_optimizer_slot(kernels_, kernels_.to_device(param->data)));
  }
  allreduce_buckets_ = allreduce_buckets(model_.parameters(), options_.allreduce_bucket_bytes);
  refresh_compute_copies();
}

StepStats ReplicatedTrainer::train_step(Context& ctx, const DataSource& data, int64_t step) {
  ZERO3_CHECK(ctx.kernels().device() == kernels_.device(), "the context computes on " +
                                                                device_name(ctx.kernels().device()) + ", the trainer on " +
                                                                device_name(kernels_.device()));
  // The phases' wall clock (step_stats.h's PhaseTimes), in consecutive laps; no offload here.
  const Stopwatch step_watch;
  Stopwatch lap = step_watch;  // the first lap starts with the step
  PhaseTimes phases;
  const double recompute_before = ctx.recompute_seconds();
  ctx.set_step(step);
  grad_accum_.clear();
  for (const Parameter* param : model_.parameters()) grad_accum_.push_back(device_zeros(kernels_, param->shape()));
  micro_losses_ = device_zeros(kernels_, {config_.gradient_accumulation_steps});
  // Counted as the ZeRO-3 engine counts them (activation), so the two report the same activations.
  if (options_.allocator) {
    options_.allocator->acquire(MemoryCategory::activation, micro_losses_.bytes(), "micro-step losses");
  }

  for (int64_t micro = 0; micro < config_.gradient_accumulation_steps; ++micro) {
    forward_backward(ctx, data, step, micro, lap, phases);
    reduce_gradients(ctx, step);
    phases.backward_s += lap.lap_seconds();
  }
  for (Tensor& accum : grad_accum_) finish_accumulation(ctx.kernels(), accum, config_.gradient_accumulation_steps);

  StepStats stats;
  stats.step = step;
  stats.loss = mean_loss(step);
  if (options_.allocator) options_.allocator->release(MemoryCategory::activation, micro_losses_.bytes());
  stats.grad_norm = global_grad_norm();
  stats.clip = clip_coefficient(stats.grad_norm, config_.gradient_clipping);
  const AdamWCoefficients coefficients = adamw_coefficients(config_.adamw, step + 1);
  for (size_t id = 0; id < slots_.size(); ++id) {
    // A frozen parameter keeps its value (AdamW's weight decay would move it) and zero moments.
    if (model_.parameters()[id]->requires_grad()) {
      adamw_update(ctx.kernels(), slots_[id], grad_accum_[id], stats.clip, coefficients);
    }
  }
  refresh_compute_copies();
  phases.optimizer_s = lap.lap_seconds();
  phases.recompute_s = ctx.recompute_seconds() - recompute_before;
  phases.step_s = step_watch.seconds();
  stats.phases = phases;
  return stats;
}

double ReplicatedTrainer::mean_loss(int64_t step) {
  const double gas = static_cast<double>(config_.gradient_accumulation_steps);
  if (!options_.comm) {
    // The reference reports the double mean of its micro-step losses (one host read).
    const Tensor losses = kernels_.to_host(micro_losses_);
    double total = 0.0;
    for (const float loss : losses.values()) total += loss;
    return total / gas;
  }
  // Every rank reports the same loss: the mean over ranks, summed in rank order.
  Tensor loss = device_zeros(kernels_, {});
  kernels_.average(micro_losses_, loss);
  options_.comm->all_reduce(loss, ReduceOp::sum, {.module = "", .params = {}, .step = step, .phase = "loss"});
  return kernels_.to_host(loss).item() / static_cast<double>(world());
}

std::vector<OptimizerSlot> ReplicatedTrainer::host_copies(const std::vector<OptimizerSlot>& slots) const {
  std::vector<OptimizerSlot> copies;
  for (const OptimizerSlot& slot : slots) {
    copies.push_back({kernels_.to_host(slot.master), kernels_.to_host(slot.exp_avg), kernels_.to_host(slot.exp_avg_sq)});
  }
  return copies;
}

std::vector<OptimizerSlot> ReplicatedTrainer::full_state(int64_t) { return host_copies(slots_); }

std::vector<OptimizerSlot> ReplicatedTrainer::checkpoint_shards(int64_t) {
  return shard_state(host_copies(slots_), world(), rank());
}

void ReplicatedTrainer::load_state(const std::vector<OptimizerSlot>& slots) {
  ZERO3_CHECK(slots.size() == slots_.size(), "one optimizer slot per parameter");
  for (const Parameter* param : model_.parameters()) {
    const OptimizerSlot& loaded = slots[static_cast<size_t>(param->id())];
    for (const Tensor* value : {&loaded.master, &loaded.exp_avg, &loaded.exp_avg_sq}) {
      ZERO3_CHECK(value->numel() == param->numel(), "loaded state of '" + param->name() + "' must be full size");
    }
    // Copies onto the device: the DDP ranks of one process may load from the same tensors.
    const auto upload = [&](const Tensor& host) { return kernels_.copy_to_device(host.reshape(param->shape())); };
    slots_[static_cast<size_t>(param->id())] = {upload(loaded.master), upload(loaded.exp_avg),
                                                upload(loaded.exp_avg_sq)};
  }
  refresh_compute_copies();
}

void ReplicatedTrainer::forward_backward(Context& ctx, const DataSource& data, int64_t step, int64_t micro,
                                         Stopwatch& lap, PhaseTimes& phases) {
  ctx.begin_micro_step();
  const int64_t batch_size = options_.comm ? config_.micro_batch_size
                                           : config_.micro_batch_size * options_.global_ranks;
  const Batch batch = data.batch(step, micro, rank(), world(), batch_size);
  Var loss = model_.loss(ctx, batch);
  kernels_.copy_segments(loss.value(), micro_losses_, {{.from = 0, .to = micro, .count = 1}});
  phases.forward_s += lap.lap_seconds();
  backward(ctx, loss);
}

void ReplicatedTrainer::reduce_gradients(Context& ctx, int64_t step) {
  // Backward left every used parameter's full gradient; they are all alive until reduced here.
  int64_t grad_bytes = 0;
  for (const Parameter* param : model_.parameters()) {
    const Tensor grad = ctx.param_grad(*param);
    if (grad.defined()) grad_bytes += grad.bytes();
  }
  if (options_.allocator && grad_bytes > 0) options_.allocator->acquire(MemoryCategory::grad, grad_bytes, "gradients");
  for (const std::vector<const Parameter*>& bucket : allreduce_buckets_) {
    if (bucket.size() == 1) reduce_parameter(ctx, *bucket.front(), step);
    else reduce_bucket(ctx, bucket, step);
  }
  if (options_.allocator && grad_bytes > 0) options_.allocator->release(MemoryCategory::grad, grad_bytes);
}

void ReplicatedTrainer::reduce_parameter(Context& ctx, const Parameter& param, int64_t step) {
  // An unused parameter contributes zeros, so every rank issues the same collectives.
  const Tensor grad = ctx.param_grad(param);
  // The all-reduce works in place, so it gets a copy; alone (world 1, no communicator) an f32
  // gradient is only read.
  const bool read_only = !options_.comm && grad.defined() && grad.dtype() == DType::f32;
  Tensor summed = read_only ? grad
                  : grad.defined() ? cast(kernels_, grad, DType::f32)
                                   : device_zeros(kernels_, param.shape());
  if (options_.comm) {
    all_reduce_sum(summed, {.module = param.owner().name(), .params = {param.name()}, .step = step, .phase = "backward"});
  }
  accumulate_average(ctx.kernels(), grad_accum_[static_cast<size_t>(param.id())], summed, world());
}

void ReplicatedTrainer::reduce_bucket(Context& ctx, const std::vector<const Parameter*>& bucket, int64_t step) {
  // The bucket's f32 gradients end to end, in id order. The buffer starts as zeros, which is what
  // an unused parameter contributes; packing widens a bf16 gradient exactly, as the cast would.
  int64_t bucket_numel = 0;
  std::vector<std::string> names;
  for (const Parameter* param : bucket) {
    bucket_numel += param->numel();
    names.push_back(param->name());
  }
  Tensor packed = device_zeros(kernels_, {bucket_numel});
  int64_t offset = 0;
  for (const Parameter* param : bucket) {
    const Tensor grad = ctx.param_grad(*param);
    if (grad.defined()) kernels_.copy_segments(grad, packed, {{.from = 0, .to = offset, .count = param->numel()}});
    offset += param->numel();
  }
  // Each element is summed over ranks in rank order wherever it sits in the buffer, so one
  // all-reduce per bucket equals one per parameter bit for bit.
  if (options_.comm) all_reduce_sum(packed, {.module = "", .params = std::move(names), .step = step, .phase = "backward"});
  offset = 0;
  for (const Parameter* param : bucket) {
    Tensor summed = device_uninitialized(kernels_, param->shape());
    kernels_.copy_segments(packed, summed, {{.from = offset, .to = 0, .count = param->numel()}});
    accumulate_average(ctx.kernels(), grad_accum_[static_cast<size_t>(param->id())], summed, world());
    offset += param->numel();
  }
}

void ReplicatedTrainer::all_reduce_sum(Tensor& buffer, const CallSite& site) {
  if (!block_) {
    options_.comm->all_reduce(buffer, ReduceOp::sum, site);
    return;
  }
  block_->all_reduce(buffer, ReduceOp::sum, site);
  across_blocks_->all_reduce(buffer, ReduceOp::sum, site);
}

int ReplicatedTrainer::norm_partials() const { return block_ ? block_->world() : world(); }

float ReplicatedTrainer::global_grad_norm() {
  // The canonical norm (optimizer.h): one f32 partial per rank of the world (HSDP: of a block, as
  // every block holds the whole gradient), added in rank order.
  const int partials_count = norm_partials();
  Tensor partials = device_zeros(kernels_, {partials_count});
  for (int rank = 0; rank < partials_count; ++rank) {
    std::vector<TensorRange> parts;
    for (const Tensor& grad : grad_accum_) {
      const ShardRange range = shard_range(grad.numel(), partials_count, rank);
      parts.push_back({&grad, range.begin, range.begin + range.owned()});
    }
    kernels_.sum_of_squares_into(parts, partials, rank);
  }
  const Tensor host_partials = kernels_.to_host(partials);
  float total = 0.0f;
  for (const float partial : host_partials.values()) total += partial;
  return std::sqrt(total);
}

void ReplicatedTrainer::refresh_compute_copies() {
  const DType compute = config_.bf16 ? DType::bf16 : DType::f32;
  for (Parameter* param : model_.parameters()) param->data = cast(kernels_, slots_[param->id()].master, compute);
}

}  // namespace zero3
