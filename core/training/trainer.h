// Trainer: what the per-rank program (zero3/rank_program.h) asks of a trainer, whichever it is —
// the replicated trainer (single-process reference, DDP) or the ZeRO-3 engine. Both take the same
// step arguments and hand their state over in the checkpoint's layout, so one program drives them.
//
//   StepStats stats = trainer.train_step(ctx, data, step);
//   write_shard_file(dir, manifest, rank, trainer.checkpoint_shards(step));
//   std::vector<OptimizerSlot> full = trainer.full_state(steps);   // every rank calls it
#pragma once
#include <cstdint>
#include <vector>

#include "core/autograd/context.h"
#include "core/models/data.h"
#include "core/training/optimizer.h"
#include "core/training/step_stats.h"

namespace zero3 {

class Trainer {
 public:
  virtual ~Trainer() = default;
  // One optimizer step: gradient_accumulation_steps micro-steps of this rank's data, then AdamW.
  virtual StepStats train_step(Context& ctx, const DataSource& data, int64_t step) = 0;
  // This rank's part of a checkpoint: per parameter id its f32 master and moments, shard_numel
  // elements for this world size, padding zero (checkpoint.h). Write them out before the next step.
  // Collective where a rank does not hold its world shard itself (HSDP): every rank calls it.
  virtual std::vector<OptimizerSlot> checkpoint_shards(int64_t step) = 0;
  // Resumes from a full state by parameter id (as Checkpoint::full holds it), saved at any world
  // size. Call between steps.
  virtual void load_full_state(Context& ctx, const std::vector<OptimizerSlot>& full) = 0;
  // The full f32 master weights and moments by parameter id. Collective for a sharded trainer:
  // every rank must call it.
  virtual std::vector<OptimizerSlot> full_state(int64_t step) = 0;
};

}  // namespace zero3
