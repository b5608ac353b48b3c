// Running the DDP reference or the ZeRO-3 engine on simulated ranks, and comparing runs.
#include "sim/distributed_training.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>

#include "core/training/checkpoint.h"
#include "core/training/checkpoint_series.h"
#include "core/base/errors.h"
#include "core/models/model_zoo.h"
#include "core/zero3/rank_program.h"
#include "sim/observed_communicator.h"
#include "sim/opaque_device.h"
#include "sim/recorder.h"

namespace zero3 {

namespace {

struct RankOutput {
  RankProgramResult program;
  std::vector<std::string> param_names;
  std::optional<RankMemory> training_memory;  // peaks when training ended, before the final gather
};

RankMemory memory_of(const SimAllocator& allocator) {
  RankMemory memory;
  for (int category = 0; category < kMemoryCategoryCount; ++category) {
    memory.peak_bytes[static_cast<size_t>(category)] = allocator.peak_bytes(static_cast<MemoryCategory>(category));
  }
  memory.peak_total_bytes = allocator.peak_total_bytes();
  return memory;
}

void run_rank(SimRank& sim, const DistributedRunOptions& options, const Checkpoint* resume, RankOutput& output) {
  BuiltModel built = build_run_model(options);
  initialize_model(built, options.seed);
  output.param_names = built.model->parameter_names();
  // Collectives' staging buffers count as comm_buffer, as in replay.
  ObservedCommunicator comm(sim.comm(), sim.allocator(), nullptr);
  RankProgramOptions program{.config = options.config,
                             .bugs = options.bugs,
                             .seed = options.seed,
                             .steps = options.steps,
                             .resume = resume,
                             .save_checkpoint = options.save_checkpoint,
                             .save_after_step = options.save_at_step,
                             .save_every = options.save_every,
                             .keep_last = options.keep_last,
                             .on_step = options.on_step,
                             .on_training_done = [&] { output.training_memory = memory_of(sim.allocator()); },
                             .ddp_allreduce_bucket_bytes = options.ddp_allreduce_bucket_bytes};
  if (options.observer_for_rank) program.observer = options.observer_for_rank(sim.rank());
  output.program = run_rank_program({.comm = &comm, .allocator = sim.allocator(), .kernels = sim.kernels(), .faults = &sim},
                                    built, program);
}

// The checkpoint to resume from, validated against the model once for all ranks, and the save step
// checked against the steps this run takes.
std::optional<Checkpoint> checkpoint_to_resume(const DistributedRunOptions& options) {
  std::optional<Checkpoint> resume;
  if (!options.load_checkpoint.empty()) {
    const BuiltModel built = build_run_model(options);
    resume = load_checkpoint(options.load_checkpoint, *built.model);
  }
  check_checkpoint_steps(options.load_checkpoint, resume ? resume->manifest.step : 0, options.steps,
                         options.save_checkpoint.empty() ? 0 : options.save_at_step);
  return resume;
}

std::map<std::string, CollectiveTotals> collective_totals(const SimResult& sim) {
  std::map<std::string, CollectiveTotals> totals;
  sim.recorder->for_each_collective(0, [&](const CollectiveEvent& event) {
    // The end-of-run gather for comparisons is not part of training's traffic.
    if (event.site->phase == "gather_state") return;
    CollectiveTotals& total = totals[collective_op_name(event.signature.op)];
    total.count++;
    total.bytes += event.bytes;
  });
  return totals;
}

}  // namespace

BuiltModel build_run_model(const DistributedRunOptions& options) {
  const ModelOptions model_options{.seed = options.seed,
                                   .data_file = options.data_file,
                                   .micro_steps_per_step = options.config.gradient_accumulation_steps,
                                   .init_from = options.init_from,
                                   .init_names = options.init_names};
  if (!options.model_spec.is_null()) return build_model_from_spec(options.model_spec, "model_spec", model_options);
  return build_model(options.model, model_options);
}

DistributedRunResult run_distributed(const DistributedRunOptions& options) {
  SimOptions sim_options;
  sim_options.world = options.world;
  sim_options.seed = options.fault_seed != 0 ? options.fault_seed : options.seed;
  sim_options.faults = options.faults;
  sim_options.fiber_stack_bytes = 1 << 20;  // model code and BLAS run on the fiber stacks
  sim_options.kernels = &simulated_device_kernels(options.device);
  const std::optional<Checkpoint> resume = checkpoint_to_resume(options);
  if (!options.save_checkpoint.empty() && options.save_every > 0) prepare_checkpoint_series(options.save_checkpoint);
  else if (!options.save_checkpoint.empty()) prepare_checkpoint_save(options.save_checkpoint);
  SimWorld world(sim_options);
  std::vector<RankOutput> outputs(static_cast<size_t>(options.world));
  DistributedRunResult result;
  const Checkpoint* resume_from = resume ? &*resume : nullptr;
  result.sim = world.run(
      [&](SimRank& sim) { run_rank(sim, options, resume_from, outputs[static_cast<size_t>(sim.rank())]); });
  // A run that ended before its save step leaves an empty staging folder; a published save, none.
  if (!options.save_checkpoint.empty() && options.save_every == 0) abandon_checkpoint_save(options.save_checkpoint);
  result.steps = outputs[0].program.steps;
  result.final_state = outputs[0].program.final_state;
  result.counters = outputs[0].program.counters;
  result.param_names = outputs[0].param_names;
  for (const RankOutput& output : outputs) {
    result.steps_by_rank.push_back(output.program.steps);
    result.final_state_by_rank.push_back(output.program.final_state);
  }
  for (int rank = 0; rank < options.world; ++rank) {
    // A rank that failed has no training snapshot: its peaks up to the failure.
    const std::optional<RankMemory>& snapshot = outputs[static_cast<size_t>(rank)].training_memory;
    result.memory.push_back(snapshot ? *snapshot : memory_of(world.rank(rank).allocator()));
  }
  result.collectives = collective_totals(result.sim);
  return result;
}

namespace {

// Bit for bit, floats and doubles alike (a loss is a double: a float comparison would hide
// differences below float precision).
template <typename Value>
void compare_values(const std::string& what, std::span<const Value> a, std::span<const Value> b,
                    StateComparison& comparison) {
  if (a.size() != b.size()) {
    comparison.bitwise_equal = false;
    comparison.wrong += static_cast<int64_t>(std::max(a.size(), b.size()));
    comparison.first_differences += what + ": sizes " + std::to_string(a.size()) + " vs " + std::to_string(b.size()) + "\n";
    return;
  }
  int64_t wrong_here = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(Value)) == 0) continue;
    comparison.bitwise_equal = false;
    comparison.max_abs_diff =
        std::max(comparison.max_abs_diff, std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
    if (wrong_here++ == 0 && comparison.wrong < 5) {
      char line[160];
      std::snprintf(line, sizeof(line), "[%zu]: %.17g vs %.17g\n", i, static_cast<double>(a[i]),
                    static_cast<double>(b[i]));
      comparison.first_differences += what + line;
    }
  }
  comparison.wrong += wrong_here;
}

// One rank's steps and final state against another's; `prefix` names the pair in differences.
void compare_rank_results(const std::string& prefix, const std::vector<StepStats>& steps_a,
                          const std::vector<OptimizerSlot>& state_a, const std::vector<StepStats>& steps_b,
                          const std::vector<OptimizerSlot>& state_b, const std::vector<std::string>& param_names,
                          StateComparison& comparison) {
  std::vector<double> losses_a, losses_b;
  for (const StepStats& stats : steps_a) losses_a.push_back(stats.loss);
  for (const StepStats& stats : steps_b) losses_b.push_back(stats.loss);
  compare_values<double>(prefix + "loss", losses_a, losses_b, comparison);
  std::vector<float> norms_a, norms_b;
  for (const StepStats& stats : steps_a) norms_a.push_back(stats.grad_norm);
  for (const StepStats& stats : steps_b) norms_b.push_back(stats.grad_norm);
  compare_values<float>(prefix + "grad_norm", norms_a, norms_b, comparison);
  if (state_a.size() != state_b.size()) {
    comparison.bitwise_equal = false;
    comparison.first_differences += prefix + "parameter counts differ (" + std::to_string(state_a.size()) + " vs " +
                                    std::to_string(state_b.size()) + ")\n";
    return;
  }
  for (size_t id = 0; id < state_a.size(); ++id) {
    const std::string name = prefix + (id < param_names.size() ? param_names[id] : "param " + std::to_string(id));
    compare_values<float>(name, state_a[id].master.values(), state_b[id].master.values(), comparison);
    compare_values<float>(name + ".exp_avg", state_a[id].exp_avg.values(), state_b[id].exp_avg.values(), comparison);
    compare_values<float>(name + ".exp_avg_sq", state_a[id].exp_avg_sq.values(), state_b[id].exp_avg_sq.values(),
                          comparison);
  }
}

// Every rank of `run` against its rank 0 as that rank recorded it (callers may trim `steps`, the
// by-rank records stay whole): replicas must agree bit for bit.
void compare_replicas(const std::string& run_name, const DistributedRunResult& run, StateComparison& comparison) {
  const size_t ranks = std::min(run.steps_by_rank.size(), run.final_state_by_rank.size());
  for (size_t rank = 1; rank < ranks; ++rank) {
    compare_rank_results(run_name + " rank " + std::to_string(rank) + " vs rank 0: ", run.steps_by_rank[rank],
                         run.final_state_by_rank[rank], run.steps_by_rank[0], run.final_state_by_rank[0],
                         run.param_names, comparison);
  }
}

}  // namespace

StateComparison compare_runs(const DistributedRunResult& a, const DistributedRunResult& b) {
  StateComparison comparison;
  compare_rank_results("", a.steps, a.final_state, b.steps, b.final_state, a.param_names, comparison);
  compare_replicas("first run", a, comparison);
  compare_replicas("second run", b, comparison);
  return comparison;
}

}  // namespace zero3
