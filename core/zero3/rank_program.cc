// The per-rank training program (rank_program.h).
#include "core/zero3/rank_program.h"

#include <memory>

#include "core/autograd/context.h"
#include "core/base/errors.h"
#include "core/training/checkpoint_series.h"
#include "core/training/replicated_trainer.h"

namespace zero3 {

namespace {

int world_of(const RankSeams& seams) { return seams.comm ? seams.comm->world() : 1; }
int rank_of(const RankSeams& seams) { return seams.comm ? seams.comm->rank() : 0; }

// The DDP reference holds every parameter in full on every rank; its bytes are counted under the
// same categories as ZeRO-3's shards so that the two are comparable.
void account_replicated_state(Allocator& allocator, const Model& model, const TrainConfig& config) {
  const int64_t compute_bytes = config.bf16 ? 2 : 4;
  for (const Parameter* param : model.parameters()) {
    allocator.acquire(MemoryCategory::param_shard, param->numel() * compute_bytes, param->name());
    allocator.acquire(MemoryCategory::optimizer_state, 3 * param->numel() * 4, param->name());
    allocator.acquire(MemoryCategory::grad_shard, param->numel() * 4, param->name());
  }
}

// Every rank writes its own shard file into the staging folder; rank 0 writes the metadata once a
// barrier says every file is on disk and moves the checkpoint in place, and a second barrier tells
// every rank that it is complete. A rank that fails, or sees a peer fail, removes the staging
// folder (gone once published), so a failed save leaves the previous checkpoint as it was.
// A series' step folder is new at each save, so rank 0 prepares its staging folder first and a
// barrier keeps the other ranks' files out until it has.
void save_rank_checkpoint(const RankSeams& seams, const RankProgramOptions& options, const BuiltModel& built,
                          Trainer& trainer, int64_t steps_taken, const std::string& dir) {
  const CheckpointManifest manifest =
      manifest_of(*built.model, world_of(seams), steps_taken, options.seed, built.spec, options.config);
  const std::string staging = checkpoint_staging_dir(dir);
  const CallSite site{.module = "", .params = {}, .step = steps_taken - 1, .phase = "checkpoint"};
  const bool series = options.save_every > 0;
  try {
    if (series && rank_of(seams) == 0) {
      prepare_checkpoint_save(dir);
      if (options.bugs.on(Bug::latest_recorded_before_save)) {
        record_latest_checkpoint(options.save_checkpoint, steps_taken, options.keep_last);
      }
    }
    if (series && seams.comm) seams.comm->barrier(site);
    const auto writing = [&](const std::string& what) {
      if (seams.faults && seams.faults->armed()) seams.faults->reach(kSiteCheckpointWrite, what + " of " + dir);
    };
    writing(shard_file_name(rank_of(seams)));
    write_shard_file(staging, manifest, rank_of(seams), trainer.checkpoint_shards(steps_taken - 1));
    if (seams.comm) seams.comm->barrier(site);
    if (rank_of(seams) == 0) {
      writing("the metadata");
      write_metadata(staging, manifest);
      writing("the publishing rename");
      publish_checkpoint(dir);
      if (series) record_latest_checkpoint(options.save_checkpoint, steps_taken, options.keep_last);
    }
    if (seams.comm) seams.comm->barrier(site);
  } catch (...) {
    abandon_checkpoint_save(dir);
    throw;
  }
}

// Where the save after `steps_taken` steps goes, or "" when there is none then.
std::string save_dir_after(const RankProgramOptions& options, int64_t steps_taken) {
  if (options.save_checkpoint.empty()) return "";
  if (options.save_every > 0) {
    const bool due = steps_taken % options.save_every == 0 || steps_taken == options.steps;
    return due ? checkpoint_series_dir(options.save_checkpoint, steps_taken) : "";
  }
  const int64_t save_after = options.save_after_step == 0 ? options.steps : options.save_after_step;
  return steps_taken == save_after ? options.save_checkpoint : "";
}

}  // namespace

RankProgramResult run_rank_program(const RankSeams& seams, BuiltModel& built, const RankProgramOptions& options) {
  std::unique_ptr<Zero3Engine> engine;
  std::unique_ptr<ReplicatedTrainer> replicated;
  Trainer* trainer = nullptr;
  // Without a communicator this is the single-process reference: unsharded whatever the stage.
  if (options.config.zero.stage >= 1 && seams.comm) {
    engine = std::make_unique<Zero3Engine>(*built.model, *seams.comm, seams.allocator, seams.kernels, options.config,
                                           options.bugs);
    if (options.observer) engine->set_observer(options.observer);
    engine->set_fault_points(seams.faults);
    trainer = engine.get();
  } else {
    account_replicated_state(seams.allocator, *built.model, options.config);
    replicated = std::make_unique<ReplicatedTrainer>(
        *built.model, options.config,
        ReplicatedOptions{.global_ranks = options.global_ranks, .comm = seams.comm, .allocator = &seams.allocator,
                          .kernels = &seams.kernels,
                          .allreduce_bucket_bytes = options.ddp_allreduce_bucket_bytes});
    trainer = replicated.get();
  }
  Context ctx(seams.kernels, engine.get(), rank_of(seams));
  ctx.tape().count_activations(&seams.allocator);
  ctx.set_checkpointed(
      select_modules(*built.model, checkpointed_names(built, options.config.checkpoint_modules), kCheckpointModulesKey));
  if (options.resume) trainer->load_full_state(ctx, options.resume->full);

  const int64_t first_step = options.resume ? options.resume->manifest.step : 0;
  const bool reports = rank_of(seams) == 0;
  RankProgramResult result;
  for (int64_t step = first_step; step < options.steps; ++step) {
    const int64_t syncs_before = seams.kernels.host_syncs();
    const double waited_before = seams.communication_wait_seconds ? seams.communication_wait_seconds() : 0.0;
    result.steps.push_back(trainer->train_step(ctx, *built.data, step));
    result.steps.back().host_syncs = seams.kernels.host_syncs() - syncs_before;
    if (seams.communication_wait_seconds) {
      result.steps.back().phases.communication_wait_s = seams.communication_wait_seconds() - waited_before;
    }
    if (reports && options.on_step) options.on_step(result.steps.back());
    const std::string save_dir = save_dir_after(options, step + 1);
    if (!save_dir.empty()) {
      save_rank_checkpoint(seams, options, built, *trainer, step + 1, save_dir);
      if (reports && options.on_saved) options.on_saved(step + 1, save_dir);
    }
  }
  if (options.on_training_done) options.on_training_done();
  result.final_state = trainer->full_state(options.steps);
  if (engine) result.counters = engine->counters();
  return result;
}

}  // namespace zero3
