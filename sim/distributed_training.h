// Training on W simulated ranks: every rank builds the same model from the same spec and seed,
// trains on its own data shard with the DDP reference (zero stage 0) or the ZeRO-3 engine
// (stage 3), and at the end the full f32 state is gathered so runs can be compared bit for bit.
//
//   DistributedRunOptions options{.model = "gpt-tiny", .seed = 1, .world = 4, .steps = 10};
//   options.config.zero.stage = 3;
//   DistributedRunResult result = run_distributed(options);
//   if (!result.sim.all_ok()) std::puts(result.sim.summary().c_str());
#pragma once
#include <array>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/models/model_zoo.h"
#include "core/tensor/allocator.h"
#include "core/zero3/bug_injection.h"
#include "core/training/optimizer.h"
#include "core/training/replicated_trainer.h"
#include "core/training/train_config.h"
#include "core/zero3/zero3_engine.h"
#include "sim/sim_world.h"

namespace zero3 {

struct DistributedRunOptions {
  std::string model = "gpt-tiny";  // built-in name or JSON spec path
  // When not null, the model is built from this in-memory spec instead of `model` (the property
  // harness generates specs; errors then name the source "model_spec").
  nlohmann::json model_spec = nullptr;
  std::string data_file;
  // Weights to start from instead of the seeded ones (ModelOptions::init_from, init_names).
  std::string init_from;
  std::string init_names = "zero3";
  uint64_t seed = 1;
  int world = 1;
  int64_t steps = 1;
  TrainConfig config;
  BugInjections bugs;
  FaultPlan faults;
  // Seeds the simulator's schedule and fault draws when not 0 (else `seed` does): a fault campaign
  // varies the faults while the model, data and so the fault-free result stay the same.
  uint64_t fault_seed = 0;
  // Rank 0 calls this after every step (inside the simulation; for progress output).
  std::function<void(const StepStats&)> on_step;
  // ZeRO-3 only: an observer per rank (the property harness checks lifecycle invariants with it).
  std::function<EngineObserver*(int rank)> observer_for_rank;
  // Checkpoints (core/training/checkpoint.h). Resume from this directory, saved at any world size: training
  // continues at the checkpoint's step, so `steps` still counts from the start of training.
  std::string load_checkpoint;
  // Save to this directory after `save_at_step` optimizer steps (0: after the last step).
  std::string save_checkpoint;
  int64_t save_at_step = 0;
  // > 0: a checkpoint series in save_checkpoint instead (core/training/checkpoint_series.h).
  int64_t save_every = 0;
  int64_t keep_last = 0;
  // Where every rank's tensors live and compute: cpu, or opaque (sim/opaque_device.h).
  Device device = Device::cpu;
  // Stage 0 only: gradients all-reduced in buckets of this many f32 bytes, as PyTorch DDP does
  // (ReplicatedOptions::allreduce_bucket_bytes); 0, one all-reduce per parameter.
  int64_t ddp_allreduce_bucket_bytes = 0;
};

struct RankMemory {
  std::array<int64_t, kMemoryCategoryCount> peak_bytes{};
  int64_t peak_total_bytes = 0;
};

struct CollectiveTotals {
  int64_t count = 0;
  int64_t bytes = 0;  // per rank, as recorded by the simulator
};

struct DistributedRunResult {
  SimResult sim;
  std::vector<StepStats> steps;             // rank 0's view of the steps run (from the checkpoint's
                                            // step when resuming); every rank sees the same losses
  std::vector<OptimizerSlot> final_state;   // full f32 master weights and moments by parameter id
  // Every rank's own steps and final state, by rank (rank 0's are `steps` and `final_state`):
  // compare_runs holds each rank to rank 0, so a rank that diverged is not hidden behind rank 0.
  std::vector<std::vector<StepStats>> steps_by_rank;
  std::vector<std::vector<OptimizerSlot>> final_state_by_rank;
  std::vector<std::string> param_names;     // by parameter id, for comparisons and reports
  std::vector<RankMemory> memory;           // by rank
  EngineCounters counters;                  // rank 0's (ZeRO-3 only)
  std::map<std::string, CollectiveTotals> collectives;  // rank 0's, by op name
};

// The model every rank of the run builds (not yet initialised): from the in-memory spec when there
// is one, else by name or path.
BuiltModel build_run_model(const DistributedRunOptions& options);

// A rank's error ends up in result.sim; an unusable checkpoint or save step is an InputError
// thrown before any rank runs.
DistributedRunResult run_distributed(const DistributedRunOptions& options);

// Bitwise comparison of two runs' losses (as doubles), grad norms and final state, rank 0 against
// rank 0, and within each run every other rank's copy against its rank 0 ("rank 2: loss[1]");
// empty when equal, else the first differences by name with the max absolute difference.
struct StateComparison {
  bool bitwise_equal = true;
  double max_abs_diff = 0.0;
  int64_t wrong = 0;  // elements (and losses) that differ
  std::string first_differences;
};
StateComparison compare_runs(const DistributedRunResult& a, const DistributedRunResult& b);

}  // namespace zero3
