// Unsharded training: every rank holds every parameter in full. Without a communicator this is
// the single-process reference trainer (one rank trains on the global batch); with one it is the
// DDP reference — the oracle the ZeRO-3 engine must equal bit for bit — where each rank trains on
// its own data shard and gradients are all-reduced (summed in rank order) per parameter in id order,
// or, with allreduce_bucket_bytes, packed into buckets as PyTorch DDP does (the same sums, bit for bit).
// With config.zero.shard_group_size G (0 < G < W) it is HSDP's oracle, DDP reduced over HSDP's tree
// (communicator.h): each gradient all-reduced inside its block of G ranks, then across the blocks,
// and the norm made of G partials as a block's ranks hold them. G = W is the flat DDP above.
//
//   ReplicatedTrainer trainer(*built.model, config, {.global_ranks = 4});
//   for (int64_t step = 0; step < steps; ++step) StepStats stats = trainer.train_step(ctx, *built.data, step);
#pragma once
#include <memory>
#include <vector>

#include "core/base/stopwatch.h"
#include "core/tensor/allocator.h"
#include "core/sharding/communicator.h"
#include "core/models/data.h"
#include "core/nn/model.h"
#include "core/training/optimizer.h"
#include "core/training/step_stats.h"
#include "core/training/trainer.h"
#include "core/training/train_config.h"

namespace zero3 {

struct ReplicatedOptions {
  // Ranks whose data the global batch covers. The single-process reference trains on
  // global_ranks * micro_batch_size examples per micro-step; DDP takes it from the communicator.
  int global_ranks = 1;
  Communicator* comm = nullptr;  // null: single-process reference
  // Counts the full gradients backward produces as `grad`, from backward until they are reduced
  // (null: not counted). The model state is the caller's to count.
  Allocator* allocator = nullptr;
  // Where the state lives and computes (null: cpu_kernels()); the context's kernels must match.
  Kernels* kernels = nullptr;
  // Gradients all-reduced together, as PyTorch DDP's buckets (bucket_cap_mb): parameters are taken
  // in id order and a bucket closes once its f32 gradients reach this many bytes, so a parameter
  // larger than the cap ends a bucket. 0: one all-reduce per parameter (the oracle's plain form).
  int64_t allreduce_bucket_bytes = 0;
};

class ReplicatedTrainer : public Trainer {
 public:
  ReplicatedTrainer(Model& model, const TrainConfig& config, ReplicatedOptions options);

  StepStats train_step(Context& ctx, const DataSource& data, int64_t step) override;
  // Every rank holds the full state; each saves its own shard of it, in the sharded layout.
  std::vector<OptimizerSlot> checkpoint_shards(int64_t step) override;
  void load_full_state(Context&, const std::vector<OptimizerSlot>& full) override { load_state(full); }
  std::vector<OptimizerSlot> full_state(int64_t) override;

  // The f32 master weights by parameter id, on the trainer's device (full_state(): on the host).
  const std::vector<OptimizerSlot>& slots() const { return slots_; }
  // Replaces the master weights and AdamW moments (copied; full values by id, as a checkpoint or
  // slots() holds them) and the parameters' compute copies. Call between steps.
  void load_state(const std::vector<OptimizerSlot>& slots);
  int world() const { return options_.comm ? options_.comm->world() : 1; }
  int rank() const { return options_.comm ? options_.comm->rank() : 0; }

 private:
  // One micro-step's forward and backward; `lap` splits their wall clock into `phases`.
  void forward_backward(Context& ctx, const DataSource& data, int64_t step, int64_t micro, Stopwatch& lap,
                        PhaseTimes& phases);
  void reduce_gradients(Context& ctx, int64_t step);
  void reduce_parameter(Context& ctx, const Parameter& param, int64_t step);
  void reduce_bucket(Context& ctx, const std::vector<const Parameter*>& bucket, int64_t step);
  // The sum over every rank: flat, or over HSDP's tree.
  void all_reduce_sum(Tensor& buffer, const CallSite& site);
  int norm_partials() const;  // the canonical norm's partials: G under HSDP, else the world
  double mean_loss(int64_t step);
  float global_grad_norm();
  std::vector<OptimizerSlot> host_copies(const std::vector<OptimizerSlot>& slots) const;
  void refresh_compute_copies();

  Model& model_;
  TrainConfig config_;
  ReplicatedOptions options_;
  std::vector<OptimizerSlot> slots_;     // by parameter id
  std::vector<Tensor> grad_accum_;       // f32, by parameter id
  std::vector<std::vector<const Parameter*>> allreduce_buckets_;  // id order; one per all-reduce
  Kernels& kernels_;
  // HSDP's tree (null for flat DDP): this rank's block, and one rank of each block.
  std::unique_ptr<Communicator> block_;
  std::unique_ptr<Communicator> across_blocks_;
  Tensor micro_losses_;                  // f32 [gradient_accumulation_steps] on the device
};

}  // namespace zero3
