// The per-rank training program: one rank's whole run over the three seams — the trainer (the
// replicated DDP/reference trainer for zero stage 0, the ZeRO-3 engine for stage 3), resuming from
// a checkpoint, the steps, its part of a checkpoint save, and the final state. The simulator runs
// it on every rank's fiber and the CLI's reference backend runs it in-process with no communicator;
// GPU threads and MPI processes run it the same way.
//
//   RankProgramOptions options{.config = config, .seed = 1, .steps = 100};
//   RankProgramResult result = run_rank_program({.comm = &comm, .allocator = allocator,
//                                                .kernels = kernels}, built, options);
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "core/base/fault_points.h"
#include "core/models/model_zoo.h"
#include "core/sharding/communicator.h"
#include "core/tensor/allocator.h"
#include "core/tensor/kernels.h"
#include "core/training/checkpoint.h"
#include "core/training/step_stats.h"
#include "core/training/train_config.h"
#include "core/zero3/bug_injection.h"
#include "core/zero3/zero3_engine.h"

namespace zero3 {

struct RankSeams {
  Communicator* comm = nullptr;  // null: the single-process reference (world size 1, unsharded)
  Allocator& allocator;          // counts the model state, gradients, activations and buffers
  Kernels& kernels;
  // Where a fault may fire outside the collectives (core/base/fault_points.h); null: never.
  FaultPoints* faults = nullptr;
  // Seconds this rank has been blocked on collectives so far (TimedCommunicator::wait_seconds over
  // `comm`): each step's growth is its PhaseTimes::communication_wait_s. Empty: 0 in every step.
  std::function<double()> communication_wait_seconds = {};
};

struct RankProgramOptions {
  TrainConfig config;
  BugInjections bugs = {};
  uint64_t seed = 1;   // recorded in checkpoints
  int64_t steps = 1;   // optimizer steps from the start of training, also when resuming
  // Without a communicator: the reference trains on this many ranks' data per micro-step.
  int global_ranks = 1;
  const Checkpoint* resume = nullptr;  // loaded and validated for this model by the caller
  std::string save_checkpoint = {};    // "" for no save; prepare_checkpoint_save() done by the caller
  int64_t save_after_step = 0;         // the optimizer step after which to save; 0: the last
  // > 0: a checkpoint series instead (checkpoint_series.h): a save after every save_every-th step
  // and after the last, each into save_checkpoint/step_N, keeping the newest keep_last (0: all).
  // prepare_checkpoint_series() done by the caller.
  int64_t save_every = 0;
  int64_t keep_last = 0;
  std::function<void(const StepStats&)> on_step = {};         // rank 0, after every step
  std::function<void(int64_t steps_taken, const std::string& dir)> on_saved = {};  // rank 0, once published
  std::function<void()> on_training_done = {};                 // every rank, before the final gather
  EngineObserver* observer = nullptr;                          // ZeRO-3 only
  int64_t ddp_allreduce_bucket_bytes = 0;  // stage 0 only: ReplicatedOptions::allreduce_bucket_bytes
};

struct RankProgramResult {
  std::vector<StepStats> steps;             // from the checkpoint's step when resuming
  std::vector<OptimizerSlot> final_state;   // full f32 master weights and moments by parameter id
  EngineCounters counters;                  // ZeRO-3 only
};

// `built` is this rank's model, initialised from the seed (the same on every rank). Errors are
// typed (errors.h); a peer's failure reaches this rank as the communicator's error.
RankProgramResult run_rank_program(const RankSeams& seams, BuiltModel& built, const RankProgramOptions& options);

}  // namespace zero3
