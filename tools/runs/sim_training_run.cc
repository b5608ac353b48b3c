// Simulated training from the CLI: progress, faults, --check and the sim report fields.
#include "tools/runs/sim_training_run.h"

#include <cmath>
#include <cstdio>
#include <optional>

#include "core/base/atomic_file.h"
#include "core/training/checkpoint.h"
#include "core/training/checkpoint_series.h"
#include "core/base/errors.h"
#include "core/base/hash.h"
#include "core/models/model_zoo.h"
#include "core/zero3/rank_program.h"
#include "core/sharding/partition.h"
#include "sim/distributed_training.h"
#include "sim/single_process_oracle.h"
#include "tools/runs/model_state.h"
#include "tools/runs/progress.h"
#include "tools/runs/training_run.h"
#include "traces/format/trace_recorder.h"

namespace zero3 {

namespace {

DistributedRunOptions distributed_options(const TrainOptions& options, const TrainConfig& config) {
  DistributedRunOptions run;
  run.model = options.model;
  run.data_file = options.data_file;
  run.init_from = options.init_from;
  run.init_names = options.init_names;
  run.seed = options.seed;
  run.world = options.ranks;
  run.steps = options.steps;
  run.device = train_device(options);
  run.config = config;
  run.faults = FaultPlan::parse(options.faults);
  run.load_checkpoint = options.load_checkpoint;
  run.save_checkpoint = options.save_checkpoint;
  run.save_at_step = options.save_at.value_or(0);
  run.save_every = options.save_every;
  run.keep_last = options.keep_last;
  return run;
}

nlohmann::json memory_json(const DistributedRunResult& result) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const RankMemory& memory : result.memory) {
    nlohmann::json peaks;
    for (int category = 0; category < kMemoryCategoryCount; ++category) {
      peaks[memory_category_name(static_cast<MemoryCategory>(category))] = memory.peak_bytes[static_cast<size_t>(category)];
    }
    peaks["total"] = memory.peak_total_bytes;
    ranks.push_back(peaks);
  }
  return ranks;
}

nlohmann::json collectives_json(const DistributedRunResult& result) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [op, totals] : result.collectives) out[op] = {{"count", totals.count}, {"bytes", totals.bytes}};
  return out;
}

// Ends the CLI run with the root cause's own error, so that its type (deadlock, mismatch, out of
// memory...) reaches the exit code and the report; the summary printed first says it was simulated.
[[noreturn]] void fail_run(const DistributedRunResult& result) {
  std::printf("%s\n", result.sim.summary().c_str());
  const RankOutcome& root = result.sim.ranks.at(static_cast<size_t>(result.sim.root_cause_rank));
  try {
    std::rethrow_exception(root.exception);
  } catch (const Zero3Error&) {
    throw;
  } catch (...) {
    throw CorrectnessError("simulated run failed: " + result.sim.root_cause());
  }
}

// The single-process oracle (sim/single_process_oracle.h): printed, reported, and enforced with
// exit 2 beyond its per-dtype tolerance.
void enforce_single_process_oracle(const char* run_name, const TrainOptions& options, const TrainConfig& config,
                                   const DistributedRunResult& run, nlohmann::json& report) {
  const OracleDifferences found = differences_to_single_process(distributed_options(options, config), run);
  const OracleTolerance tolerance = single_process_tolerance(config.bf16);
  std::printf("check: %s vs the single-process reference on the global batch: loss %.3g relative (tolerance %.3g), "
              "grad norm %.3g relative (tolerance %.3g), max |parameter difference| %.3g",
              run_name, found.loss_relative, tolerance.loss_relative, found.grad_norm_relative,
              tolerance.grad_norm_relative, found.parameter_absolute);
  if (tolerance.parameter_absolute > 0.0) std::printf(" (tolerance %.3g)", tolerance.parameter_absolute);
  std::printf("\n");
  report["max_diff_to_single_process"] = found.parameter_absolute;
  report["single_process_oracle"] = {{"loss_relative", found.loss_relative},
                                     {"grad_norm_relative", found.grad_norm_relative},
                                     {"parameter_absolute", found.parameter_absolute},
                                     {"tolerance",
                                      {{"loss_relative", tolerance.loss_relative},
                                       {"grad_norm_relative", tolerance.grad_norm_relative},
                                       {"parameter_absolute", tolerance.parameter_absolute}}}};
  const std::string violations = oracle_violations(found, tolerance);
  if (!violations.empty()) {
    throw CorrectnessError(std::string(run_name) + " differs from the single-process reference beyond tolerance:\n" +
                           violations);
  }
}

// Rank 0's host<->device copies per optimizer step, printed and reported.
nlohmann::json offload_traffic(const EngineCounters& counters, int64_t steps) {
  const int64_t down = steps > 0 ? counters.device_to_host_bytes / steps : 0;
  const int64_t up = steps > 0 ? counters.host_to_device_bytes / steps : 0;
  std::printf("offload: %lld bytes device->host and %lld bytes host->device per step on rank 0 (gradient shards "
              "down, updated shards up; parameter shards up for every gather under offload_param)\n",
              static_cast<long long>(down), static_cast<long long>(up));
  return {{"device_to_host_bytes_per_step", down}, {"host_to_device_bytes_per_step", up}};
}

// HSDP beside flat DDP (rank-order sums): another order of float additions, so not bitwise; within
// the single-process oracle's parameter tolerance, which bounds rounding of the same size.
void compare_with_flat_ddp(DistributedRunOptions flat, const DistributedRunResult& zero3_run, nlohmann::json& report) {
  flat.config.zero.shard_group_size = 0;
  const DistributedRunResult flat_run = run_distributed(flat);
  if (!flat_run.sim.all_ok()) fail_run(flat_run);
  const StateComparison comparison = compare_runs(zero3_run, flat_run);
  const double tolerance = single_process_tolerance(flat.config.bf16).parameter_absolute;
  std::printf("check: HSDP vs flat DDP (rank-order sums): max diff %.3g", comparison.max_abs_diff);
  if (tolerance > 0.0) std::printf(" (tolerance %.3g)", tolerance);
  std::printf("\n");
  report["max_diff_to_flat_ddp"] = comparison.max_abs_diff;
  if (tolerance > 0.0 && comparison.max_abs_diff > tolerance) {
    throw CorrectnessError("HSDP differs from flat DDP by " + std::to_string(comparison.max_abs_diff) +
                           ", beyond rounding (tolerance " + std::to_string(tolerance) + "):\n" +
                           comparison.first_differences);
  }
}

void check_against_references(const TrainOptions& options, const TrainConfig& config,
                              const DistributedRunResult& zero3_run, nlohmann::json& report) {
  std::printf("check: running the DDP reference on the same %d ranks and data...\n", options.ranks);
  DistributedRunOptions ddp = distributed_options(options, config);
  // Plain DDP: no stage, and none of the levers (checkpointing, offload) that must not change a bit.
  ddp.config.zero.stage = 0;
  ddp.config.zero.offload_optimizer = OffloadDevice::none;
  ddp.config.zero.offload_param = OffloadDevice::none;
  ddp.config.zero.hpz_group_size = 1;  // hpZ reduces as flat ZeRO-3: its oracle is flat DDP; HSDP keeps its tree
  ddp.config.checkpoint_modules.clear();
  ddp.save_checkpoint.clear();  // the checked run saves; its reference must not overwrite that
  const DistributedRunResult ddp_run = run_distributed(ddp);
  if (!ddp_run.sim.all_ok()) fail_run(ddp_run);
  const StateComparison comparison = compare_runs(zero3_run, ddp_run);
  const std::string tree = config.zero.shard_ranks(options.ranks) < options.ranks
                               ? " reduced over HSDP's tree (blocks of " + std::to_string(config.zero.shard_group_size) + ")"
                               : std::string();
  std::printf("check: ZeRO-%d vs DDP%s: %s (losses, grad norms, parameters, AdamW moments; #wrong %lld, max diff %.3g)\n",
              config.zero.stage, tree.c_str(), comparison.bitwise_equal ? "bitwise equal" : "DIFFERENT",
              static_cast<long long>(comparison.wrong), comparison.max_abs_diff);
  report["bitwise_equal_to_ddp"] = comparison.bitwise_equal;
  report["max_diff_to_ddp"] = comparison.max_abs_diff;
  report["wrong_vs_ddp"] = comparison.wrong;
  report["ddp_memory_per_rank"] = memory_json(ddp_run);
  report["ddp_collectives"] = collectives_json(ddp_run);
  if (!comparison.bitwise_equal) {
    throw CorrectnessError("ZeRO-" + std::to_string(config.zero.stage) + " differs from the DDP reference:\n" +
                           comparison.first_differences);
  }
  if (!tree.empty()) compare_with_flat_ddp(ddp, zero3_run, report);
  const std::string zero_run = "ZeRO-" + std::to_string(config.zero.stage);
  enforce_single_process_oracle(zero_run.c_str(), options, config, zero3_run, report);
}


}  // namespace

void train_simulated(const TrainOptions& options, const TrainConfig& config, TrainOutcome& outcome,
                     nlohmann::json& report) {
  DistributedRunOptions run = distributed_options(options, config);
  if (!options.record_path.empty() && !options.load_checkpoint.empty()) {
    throw InputError("--record cannot be combined with --load-checkpoint: a trace records a run from its first step");
  }
  if (!options.load_checkpoint.empty()) {
    const CheckpointManifest manifest = read_checkpoint_manifest(options.load_checkpoint);
    warn_about_resume_differences(options.load_checkpoint, manifest, options.seed, config, options.ranks);
    // Before the step lines, which continue from it.
    std::printf("  resumed at step %lld from %s (saved at world size %d)\n", static_cast<long long>(manifest.step),
                options.load_checkpoint.c_str(), manifest.world);
  }
  ProgressBar progress(options.steps, "train");
  run.on_step = [&](const StepStats& stats) {
    if ((stats.step + 1) % options.log_every == 0 || stats.step + 1 == options.steps) {
      progress.finish();
      std::printf("step %5lld/%lld  loss %.4f  grad_norm %.4f  clip %.3f\n", static_cast<long long>(stats.step + 1),
                  static_cast<long long>(options.steps), stats.loss, stats.grad_norm, stats.clip);
      std::fflush(stdout);
    }
    progress.update(stats.step + 1, "loss " + std::to_string(stats.loss));
  };
  const DistributedRunResult result = run_distributed(run);
  progress.finish();
  for (const FiredFault& fault : result.sim.fired) std::printf("fault fired: %s\n", describe(fault).c_str());
  if (!options.record_path.empty()) {
    // A trace (traces/FORMAT.md): the run's events, re-recorded on the DDP reference so they are
    // complete even when this run hung, and this run's collective log.
    const Trace trace = record_training_trace(run, result.sim.event_log());
    write_trace(options.record_path, trace);
    std::printf("  trace (%s, event log hash %s) written to %s; replay it with `zero3 replay %s`\n",
                trace.divergent() ? "per-rank events" : "one event list for all ranks",
                hex64(result.sim.event_log_hash).c_str(), options.record_path.c_str(), options.record_path.c_str());
  }
  if (!result.sim.all_ok()) fail_run(result);
  if (!options.save_checkpoint.empty() && options.save_every > 0) {
    std::printf("  checkpoints every %lld steps (%d shard files + %s each) in %s; %s names %s\n",
                static_cast<long long>(options.save_every), options.ranks, kCheckpointMetadataFile,
                options.save_checkpoint.c_str(), kLatestCheckpointFile,
                checkpoint_series_dir(options.save_checkpoint, options.steps).c_str());
  } else if (!options.save_checkpoint.empty()) {
    std::printf("  checkpoint after step %lld (%d shard files + %s) written to %s\n",
                static_cast<long long>(options.save_at.value_or(options.steps)), options.ranks, kCheckpointMetadataFile,
                options.save_checkpoint.c_str());
  }
  outcome.steps = result.steps;
  outcome.final_param_hash = hash_master_weights(result.final_state);
  outcome.final_state_hash = hash_optimizer_state(result.final_state);
  report["event_log_hash"] = hex64(result.sim.event_log_hash);
  report["memory_per_rank"] = memory_json(result);
  report["collectives"] = collectives_json(result);
  report["trace_invalidations"] = result.counters.trace_invalidations;
  if (config.zero.offload_optimizer == OffloadDevice::cpu || config.zero.offload_param == OffloadDevice::cpu) {
    report["offload"] = offload_traffic(result.counters, static_cast<int64_t>(result.steps.size()));
  }
  report["faults_fired"] = static_cast<int64_t>(result.sim.fired.size());
  if (config.zero.stage >= 1) {
    const BuiltModel built = build_model(options.model, {.seed = options.seed, .data_file = options.data_file});
    report["model_state"] = print_model_state(options, config, *built.model, result.memory.at(0).peak_bytes);
  }
  if (config.zero.stage >= 1 && options.check) check_against_references(options, config, result, report);
  // DDP sums per-rank means where the single process takes one mean: equal within tolerance only.
  if (config.zero.stage == 0 && options.check) enforce_single_process_oracle("DDP", options, config, result, report);
}

}  // namespace zero3
