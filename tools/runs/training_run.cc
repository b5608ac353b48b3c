// Driving a training run from the CLI: banner, steps, summary, report.
#include "tools/runs/training_run.h"

#include <algorithm>
#include <cmath>
#include <atomic>
#include <functional>
#include <cstdio>
#include <mutex>

#include "backend_cuda/cuda/cuda_world.h"
#include "backend_cuda/launch/launch_environment.h"
#include "backend_cuda/mpi/mpi_world.h"
#include "core/base/atomic_file.h"
#include "core/training/checkpoint.h"
#include "core/training/checkpoint_series.h"
#include "core/base/errors.h"
#include "core/base/hash.h"
#include "core/base/stopwatch.h"
#include "core/tensor/kernels.h"
#include "core/models/model_zoo.h"
#include "core/training/resume_differences.h"
#include "core/zero3/rank_program.h"
#include "tools/runs/failure_kind.h"
#include "tools/runs/measured_phases.h"
#include "tools/runs/model_state.h"
#include "tools/runs/thread_budget.h"
#include "tools/runs/mpi_training_run.h"
#include "tools/runs/progress.h"
#include "tools/runs/sim_training_run.h"
#include "tools/runs/step_throughput.h"
#include "sim/opaque_device.h"

namespace zero3 {

namespace {

// Device reads per step, the most any step made (StepStats::host_syncs).
int64_t max_host_syncs(const std::vector<StepStats>& steps) {
  int64_t most = 0;
  for (const StepStats& stats : steps) most = std::max(most, stats.host_syncs);
  return most;
}

void print_banner(const TrainOptions& options, const TrainConfig& config, const BuiltModel& built) {
  std::printf("zero3 train  backend=%s device=%s model=%s params=%lld steps=%lld seed=%llu ranks=%d\n",
              options.backend.c_str(), options.backend == "cuda" ? "cuda" : options.device.c_str(), options.model.c_str(),
              static_cast<long long>(built.model->parameter_count()),
              static_cast<long long>(options.steps), static_cast<unsigned long long>(options.seed), options.ranks);
  std::printf("  micro_batch=%lld gas=%lld lr=%g betas=(%g,%g) weight_decay=%g clip=%g bf16=%s zero_stage=%d\n",
              static_cast<long long>(config.micro_batch_size), static_cast<long long>(config.gradient_accumulation_steps),
              config.adamw.lr, config.adamw.beta1, config.adamw.beta2, config.adamw.weight_decay,
              config.gradient_clipping, config.bf16 ? "on" : "off", config.zero.stage);
  const std::string resolved = auto_resolutions(config);
  if (!resolved.empty()) std::printf("  \"auto\" in %s resolved from flags and defaults: %s\n", options.config_path.c_str(), resolved.c_str());
  std::printf("%s", lever_lines(config, built).c_str());
  std::printf("  data: %s\n", built.data->description().c_str());
  if (options.backend != "cuda") std::printf("  threads per process: %s\n", thread_choice().description.c_str());
  std::printf("  seed=%llu replay: %s\n", static_cast<unsigned long long>(options.seed), replay_command(options).c_str());
  std::fflush(stdout);
}

// --load-checkpoint on the reference trainer: the full state, whatever world size saved it.
// Rank 0 says what it loaded (GPU threads share one stdout).
std::optional<Checkpoint> reference_resume(const TrainOptions& options, const TrainConfig& config,
                                           const BuiltModel& built, bool speaks) {
  std::optional<Checkpoint> resume;
  if (!options.load_checkpoint.empty()) {
    resume = load_checkpoint(options.load_checkpoint, *built.model);
    if (speaks) {
      warn_about_resume_differences(options.load_checkpoint, resume->manifest, options.seed, config, options.ranks);
    }
    if (speaks) std::printf("  resumed at step %lld from %s (saved at world size %d)\n",
                static_cast<long long>(resume->manifest.step), options.load_checkpoint.c_str(), resume->manifest.world);
  }
  const int64_t save_at = options.save_checkpoint.empty() ? 0 : options.save_at.value_or(0);
  check_checkpoint_steps(options.load_checkpoint, resume ? resume->manifest.step : 0, options.steps, save_at);
  return resume;
}

// A save's staging folder goes when the run ends, whether or not it got as far as its save step
// (under MPI, rank 0's job, once every rank is done with it).
struct StagingCleanup {
  std::string dir;
  ~StagingCleanup() {
    if (!dir.empty()) abandon_checkpoint_save(dir);
  }
};

// The seams one in-process rank trains over: the reference and MPI ranks run the reference kernels
// of --device; a GPU rank brings its CUDA kernels and NCCL communicator.
struct InProcessRank {
  Communicator* comm = nullptr;
  Kernels& kernels;
  double peak_flops = 0.0;  // this rank's device, for MFU; 0 where unknown
  std::function<void()> after_each_step = {};  // rank 0, after the step's own line
  FaultPoints* faults = nullptr;  // MPI under --faults: where the crash may fire besides collectives
  std::function<double()> communication_wait_seconds = {};  // RankSeams' (MPI: TimedCommunicator's)
};

// Rank 0's line per logged step (loss, gradient norm, clip, time, tokens/s, MFU where the peak is
// known) and the progress bar between them. A loss that is not finite ends the run.
struct StepLines {
  const TrainOptions& options;
  const StepThroughput& throughput;
  ProgressBar& progress;
  Stopwatch watch = {};

  void print(const StepStats& stats) {
    if (!std::isfinite(stats.loss)) {
      throw CorrectnessError("loss became " + std::to_string(stats.loss) + " at step " + std::to_string(stats.step) +
                             "; lower --lr or enable clipping");
    }
    const double step_ms = watch.milliseconds();
    watch.restart();
    if ((stats.step + 1) % options.log_every == 0 || stats.step + 1 == options.steps) {
      progress.finish();
      std::printf("step %5lld/%lld  loss %.4f  grad_norm %.4f  clip %.3f  %.1f ms  %.0f tokens/s",
                  static_cast<long long>(stats.step + 1), static_cast<long long>(options.steps), stats.loss,
                  stats.grad_norm, stats.clip, step_ms, throughput.tokens_per_step * 1e3 / step_ms);
      if (throughput.peak_flops > 0.0) {
        std::printf("  MFU %.1f%%", 100.0 * throughput.flops_per_step * 1e3 / step_ms / throughput.peak_flops);
      }
      std::printf("\n");
      std::fflush(stdout);
    }
    char status[96];
    std::snprintf(status, sizeof(status), "loss %.4f", stats.loss);
    progress.update(stats.step + 1, status);
  }
};


// The reference (no communicator), one MPI rank or one GPU rank: the per-rank program in this
// process. Rank 0 prints; the others run silently.
TrainOutcome train_in_process(const TrainOptions& options, const TrainConfig& config, BuiltModel& built,
                              const InProcessRank& seams) {
  Communicator* comm = seams.comm;
  const int rank = comm ? comm->rank() : 0;
  const StepThroughput throughput = step_throughput(options, config, built, seams.peak_flops);
  const std::optional<Checkpoint> resume = reference_resume(options, config, built, rank == 0);
  // Rank 0 makes the staging folder; the barrier keeps every rank's shard file out until it has.
  if (!options.save_checkpoint.empty() && rank == 0) {
    if (options.save_every > 0) prepare_checkpoint_series(options.save_checkpoint);
    else prepare_checkpoint_save(options.save_checkpoint);
  }
  if (!options.save_checkpoint.empty() && comm) {
    comm->barrier({.module = "", .params = {}, .step = -1, .phase = "checkpoint"});
  }
  const StagingCleanup cleanup{rank == 0 && options.save_every == 0 ? options.save_checkpoint : std::string()};
  ProgressBar progress(options.steps, "train");
  StepLines step_lines{.options = options, .throughput = throughput, .progress = progress};
  RankProgramOptions program{
      .config = config,
      .seed = options.seed,
      .steps = options.steps,
      .global_ranks = options.ranks,
      .resume = resume ? &*resume : nullptr,
      .save_checkpoint = options.save_checkpoint,
      .save_after_step = options.save_at.value_or(0),
      .save_every = options.save_every,
      .keep_last = options.keep_last,
      .on_step = [&](const StepStats& stats) {
        step_lines.print(stats);
        if (seams.after_each_step) seams.after_each_step();
      },
      .on_saved = [&](int64_t steps_taken, const std::string& dir) {
        progress.finish();
        std::printf("  checkpoint after step %lld written to %s\n", static_cast<long long>(steps_taken), dir.c_str());
      }};
  CountingAllocator memory;
  const Stopwatch run_watch;
  const RankProgramResult result = run_rank_program(
      {.comm = comm, .allocator = memory, .kernels = seams.kernels, .faults = seams.faults,
       .communication_wait_seconds = seams.communication_wait_seconds},
      built, program);
  progress.finish();
  TrainOutcome outcome;
  // Under MPI or CUDA rank 0 speaks for every rank: they hold shards of the same sizes.
  if (comm && rank == 0 && config.zero.stage >= 1) {
    std::array<int64_t, kMemoryCategoryCount> peaks{};
    for (int category = 0; category < kMemoryCategoryCount; ++category) {
      peaks[static_cast<size_t>(category)] = memory.peak_bytes(static_cast<MemoryCategory>(category));
    }
    outcome.backend_report["model_state"] = print_model_state(options, config, *built.model, peaks);
  }
  outcome.steps = result.steps;
  outcome.seconds = run_watch.seconds();
  outcome.final_param_hash = hash_master_weights(result.final_state);
  outcome.final_state_hash = hash_optimizer_state(result.final_state);
  return outcome;
}

}  // namespace

void warn_about_resume_differences(const std::string& dir, const CheckpointManifest& saved, uint64_t seed,
                                   const TrainConfig& config, int world) {
  for (const std::string& line : resume_differences(saved, seed, config)) {
    std::printf("warning: resuming %s with a different %s\n", dir.c_str(), line.c_str());
  }
  if (saved.world != world) {
    // Resharding is exact, but each step now averages over another number of examples.
    const int64_t per_rank = config.micro_batch_size * config.gradient_accumulation_steps;
    std::printf("warning: resuming %s, saved at world size %d, on %d ranks: the global batch changes from %lld to "
                "%lld examples per step (micro-batch %lld x GAS %lld x ranks)\n",
                dir.c_str(), saved.world, world, static_cast<long long>(per_rank * saved.world),
                static_cast<long long>(per_rank * world), static_cast<long long>(config.micro_batch_size),
                static_cast<long long>(config.gradient_accumulation_steps));
  }
}

namespace {

// Indented, and with any invalid UTF-8 in error texts or names replaced rather than thrown on.
void write_report(const std::string& path, const nlohmann::json& report) {
  write_file_atomically(path, report.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

// Which run this was, in every report, whatever its outcome.
nlohmann::json run_identity_json(const TrainOptions& options) {
  return {{"zero3_report", 1},          {"backend", options.backend}, {"device", options.device},
          {"model", options.model},
          {"seed", options.seed},       {"ranks", options.ranks},     {"steps", options.steps},
          {"replay", replay_command(options)}};
}

void write_failure_report(const TrainOptions& options, const std::exception& error) {
  const int exit_code = failure_exit_code(error);
  nlohmann::json report = run_identity_json(options);
  report["status"] = "failed";
  report["exit_code"] = exit_code;
  report["failure"] = {{"class", exit_class_name(exit_code)}, {"kind", failure_kind(error)}, {"message", error.what()}};
  try {
    write_report(options.report_path, report);
    std::printf("  report of the failure written to %s\n", options.report_path.c_str());
  } catch (const std::exception& write_error) {
    // The run's own error decides the exit code; this one is only said.
    std::fprintf(stderr, "warning: the failure report was not written: %s\n", write_error.what());
  }
}

// The run's model, initialised from the seed (or --init-from): every trainer and rank starts here.
BuiltModel initialized_model(const TrainOptions& options, const TrainConfig& config) {
  BuiltModel built = build_model(options.model, {.seed = options.seed,
                                                 .data_file = options.data_file,
                                                 .micro_steps_per_step = config.gradient_accumulation_steps,
                                                 .init_from = options.init_from,
                                                 .init_names = options.init_names});
  initialize_model(built, options.seed);
  return built;
}

// --backend cuda: every rank this process drives (one thread per GPU, or this process's one GPU
// under a launcher) trains its own copy of the model from the same seed; rank 0's outcome is the
// run's. The world size is the number of GPUs, which --ranks may only repeat.
TrainOutcome train_on_gpus(TrainOptions& options, const TrainConfig& config, BuiltModel&) {
  std::mutex outcome_mutex;
  TrainOutcome outcome;
  const int requested_ranks = options.ranks;
  std::atomic<int> world = 1;
  run_on_cuda_ranks({.gpus = options.gpus, .collective_timeout_s = options.collective_timeout_s, .bf16 = config.bf16},
                    [&](CudaRank& rank) {
    if (requested_ranks != 1 && requested_ranks != rank.world) {
      throw InputError("--ranks " + std::to_string(requested_ranks) + " but --backend cuda runs " +
                       std::to_string(rank.world) + " ranks (one per GPU: --gpus, or the launcher's world)");
    }
    TrainOptions rank_options = options;
    rank_options.ranks = rank.world;
    world = rank.world;
    BuiltModel built = initialized_model(options, config);
    if (rank.rank == 0) {
      std::printf("  rank 0 on cuda:%d, %s; world %d%s%s\n", rank.device_index, rank.device_description.c_str(),
                  rank.world, rank.launcher.empty() ? " (one thread per GPU)" : ", launched by ",
                  rank.launcher.c_str());
    }
    // The pool's reserved bytes after every step: a caching pool that keeps growing in the steady
    // state is a leak or a fragmenting allocation pattern (tools/gpu-check reads this).
    nlohmann::json reserved_by_step = nlohmann::json::array();
    TrainOutcome mine = train_in_process(
        rank_options, config, built,
        {.comm = &rank.comm, .kernels = rank.kernels, .peak_flops = rank.peak_flops,
         .after_each_step = [&] { reserved_by_step.push_back(rank.pool_figures().reserved_bytes); }});
    rank.comm.synchronize();
    if (rank.rank != 0) return;
    const CudaPoolFigures pool = rank.pool_figures();
    mine.backend_report["cuda"] = {{"world", rank.world},
                                   {"launcher", rank.launcher},
                                   {"device", rank.device_description},
                                   {"pool_reserved_bytes", pool.reserved_bytes},
                                   {"pool_peak_reserved_bytes", pool.peak_reserved_bytes},
                                   {"pool_reserved_bytes_by_step", reserved_by_step},
                                   {"collective_timeout_s", options.collective_timeout_s}};
    std::printf("  cuda:%d pool: %.1f MiB reserved now, %.1f MiB at most\n", rank.device_index,
                static_cast<double>(pool.reserved_bytes) / (1 << 20),
                static_cast<double>(pool.peak_reserved_bytes) / (1 << 20));
    const std::lock_guard lock(outcome_mutex);
    outcome = std::move(mine);
  });
  options.ranks = world;
  return outcome;
}

// --backend ref: the single-process reference, on --device's reference kernels.
TrainOutcome train_reference(TrainOptions& options, const TrainConfig& config, BuiltModel& built) {
  return train_in_process(options, config, built,
                          {.comm = nullptr, .kernels = simulated_device_kernels(train_device(options))});
}

// --backend mpi: this process is one rank of an mpirun/srun/torchrun job.
TrainOutcome train_mpi_rank(TrainOptions& options, const TrainConfig& config, BuiltModel& built) {
  const MpiTrainingRank mpi = mpi_training_rank(options);
  const std::unique_ptr<TimedCommunicator>& comm = mpi.comm;
  TrainOutcome outcome = train_in_process(options, config, built,
                                          {.comm = comm.get(),
                                           .kernels = simulated_device_kernels(train_device(options)),
                                           .faults = mpi.faults.get(),
                                           .communication_wait_seconds = [&] { return comm->wait_seconds(); }});
  comm->synchronize();
  outcome.backend_report["mpi"] = {{"world", comm->world()},
                                   {"launcher", MpiWorld::start().launch().launcher},
                                   {"collective_timeout_s", options.collective_timeout_s}};
  return outcome;
}

// --backend sim: every rank in this process, as seeded fibers (sim_training_run.h).
TrainOutcome train_sim(TrainOptions& options, const TrainConfig& config, BuiltModel&) {
  TrainOutcome outcome;
  const Stopwatch watch;
  train_simulated(options, config, outcome, outcome.backend_report);
  outcome.seconds = watch.seconds();
  return outcome;
}

// What each --backend does with a run. Flag checks per backend are in train_options.cc.
struct TrainingBackend {
  const char* name;
  TrainOutcome (*train)(TrainOptions& options, const TrainConfig& config, BuiltModel& built);
  // Where every process computes the same outcome, only this one writes the report (null: always).
  bool (*writes_report)() = nullptr;
  // ref and sim run the whole job in this one process (see warn_when_launched_as_many).
  bool whole_job_per_process = false;
  // Runs the whole training call inside the backend's process session (null: called directly).
  TrainOutcome (*in_process_session)(const TrainOptions&, const std::function<TrainOutcome(const TrainOptions&)>&) =
      nullptr;
};

const TrainingBackend kTrainingBackends[] = {
    {.name = "ref", .train = train_reference, .whole_job_per_process = true},
    {.name = "sim", .train = train_sim, .whole_job_per_process = true},
    {.name = "mpi",
     .train = train_mpi_rank,
     .writes_report = [] { return MpiWorld::start().rank() == 0; },
     .in_process_session = run_training_as_mpi_process},
    {.name = "cuda", .train = train_on_gpus},
};

const TrainingBackend& training_backend(const std::string& name) {
  for (const TrainingBackend& backend : kTrainingBackends) {
    if (name == backend.name) return backend;
  }
  throw InputError("--backend " + name + ": expected ref, sim, mpi or cuda");
}

// Under a launcher that started several processes, a backend that runs the whole job in each one
// trains the same run several times over. Said, not refused: a batch script's environment can
// hold a launcher's variables for a process started once.
void warn_when_launched_as_many(const std::string& backend) {
  LaunchEnvironment launch;
  try {
    launch = read_launch_environment();
  } catch (const InputError&) {
    return;  // malformed launcher variables matter to --backend mpi and cuda, which report them
  }
  if (launch.world <= 1) return;
  std::fprintf(stderr,
               "warning: %s's variables say this process is rank %d of %d, but --backend %s runs the whole job in "
               "each process: %d processes would train %d copies of the same run (under a launcher, use --backend "
               "mpi)\n",
               launch.launcher.c_str(), launch.rank, launch.world, backend.c_str(), launch.world, launch.world);
}

TrainOutcome train_and_report(const TrainOptions& requested) {
  TrainOptions options = requested;
  train_device(options);  // a device the backend cannot use is refused before any work starts
  // Once for the whole run, which reads the checkpoint several times: one fallback warning at most.
  if (!options.load_checkpoint.empty()) options.load_checkpoint = checkpoint_dir_to_read(options.load_checkpoint);
  std::vector<std::string> warnings;
  const TrainConfig config = resolve_train_config(options, &warnings);
  for (const auto& warning : warnings) std::fprintf(stderr, "warning: %s\n", warning.c_str());
  BuiltModel built = initialized_model(options, config);
  // Names the model does not have are refused here, once, before any rank starts.
  (void)select_modules(*built.model, checkpointed_names(built, config.checkpoint_modules), kCheckpointModulesKey);
  check_hierarchical_sharding(options, config);
  print_banner(options, config, built);

  const TrainingBackend& backend = training_backend(options.backend);
  if (backend.whole_job_per_process) warn_when_launched_as_many(options.backend);
  TrainOutcome outcome = backend.train(options, config, built);
  outcome.parameter_count = built.model->parameter_count();
  outcome.unigram_entropy_nats = built.data->unigram_entropy_nats();
  outcome.data_description = built.data->description();

  const double first = outcome.steps.front().loss;
  const double last = outcome.steps.back().loss;
  std::printf("done  %zu steps in %.2f s  loss %.4f -> %.4f", outcome.steps.size(), outcome.seconds, first, last);
  if (outcome.unigram_entropy_nats) std::printf("  (unigram entropy of the data %.4f)", *outcome.unigram_entropy_nats);
  std::printf("\n  final parameter hash %s (with the AdamW moments %s)\n", outcome.final_param_hash.c_str(),
              outcome.final_state_hash.c_str());
  std::printf("  host syncs per step: %lld at most (by design 2, the loss and the gradient norm, plus 1 per MoE "
              "layer per micro-step)\n",
              static_cast<long long>(max_host_syncs(outcome.steps)));
  // The simulator's wall clock is its fibers', not a rank's: its phases go to the report only.
  if (options.backend != "sim") std::printf("%s", phase_summary_line(outcome.steps).c_str());
  if (!options.report_path.empty() && (!backend.writes_report || backend.writes_report())) {
    nlohmann::json report = outcome_to_json(options, config, outcome);
    report.update(outcome.backend_report);
    write_report(options.report_path, report);
    std::printf("  report written to %s\n", options.report_path.c_str());
  }
  return outcome;
}

}  // namespace

// A failed run writes its report too: CI reads the file, and a missing one, or an earlier run's
// left in place, would hide what went wrong.
TrainOutcome run_training(const TrainOptions& options) {
  const auto train = [](const TrainOptions& resolved) {
    try {
      return train_and_report(resolved);
    } catch (const std::exception& error) {
      if (!resolved.report_path.empty()) write_failure_report(resolved, error);
      throw;
    }
  };
  const TrainingBackend& backend = training_backend(options.backend);
  return backend.in_process_session ? backend.in_process_session(options, train) : train(options);
}

std::string hash_master_weights(const std::vector<OptimizerSlot>& state) {
  Fnv1a hash;
  for (const OptimizerSlot& slot : state) hash.add_floats(slot.master.values());
  return hex64(hash.value());
}

std::string hash_optimizer_state(const std::vector<OptimizerSlot>& state) {
  Fnv1a hash;
  for (const OptimizerSlot& slot : state) {
    hash.add_floats(slot.master.values());
    hash.add_floats(slot.exp_avg.values());
    hash.add_floats(slot.exp_avg_sq.values());
  }
  return hex64(hash.value());
}

nlohmann::json outcome_to_json(const TrainOptions& options, const TrainConfig& config, const TrainOutcome& outcome) {
  nlohmann::json losses = nlohmann::json::array();
  nlohmann::json grad_norms = nlohmann::json::array();
  for (const StepStats& stats : outcome.steps) {
    losses.push_back(stats.loss);
    grad_norms.push_back(stats.grad_norm);
  }
  nlohmann::json report = run_identity_json(options);
  report.update({
      {"status", "ok"},
      {"host_syncs_per_step", max_host_syncs(outcome.steps)},
      {"exit_code", 0},
      {"parameter_count", outcome.parameter_count},
      {"data", outcome.data_description},
      {"config", train_config_to_json(config)},
      {"losses", losses},
      {"grad_norms", grad_norms},
      {"final_param_hash", outcome.final_param_hash},
      {"final_state_hash", outcome.final_state_hash},
      {"measured_phases", measured_phases_json(outcome.steps)},
      {"timings",
       {{"total_s", outcome.seconds},
        {"step_ms_mean", 1000.0 * outcome.seconds / static_cast<double>(outcome.steps.size())}}},
  });
  if (outcome.unigram_entropy_nats) report["unigram_entropy_nats"] = *outcome.unigram_entropy_nats;
  return report;
}

}  // namespace zero3
