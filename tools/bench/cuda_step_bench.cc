// The training step and its GEMMs alone, timed in one run on the GPUs (cuda_step_bench.h).
#include "tools/bench/cuda_step_bench.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend_cuda/cuda/cuda_world.h"
#include "core/base/atomic_file.h"
#include "core/base/errors.h"
#include "core/base/stopwatch.h"
#include "core/models/model_zoo.h"
#include "core/tensor/allocator.h"
#include "core/zero3/rank_program.h"
#include "tools/runs/step_throughput.h"
#include "tools/runs/train_options.h"

namespace zero3 {

namespace {

// Passes over the recorded GEMMs; the fastest counts, as a ceiling should.
constexpr int kGemmRepetitions = 5;

// What rank 0 measured, for the table and the report.
struct BenchFigures {
  int world = 1;
  std::string launcher;
  std::string device_description;
  StepThroughput throughput;
  double step_seconds = 0.0;       // per optimizer step, the mean over the timed steps
  double gemm_only_seconds = 0.0;  // one pass over one step's GEMMs alone, the fastest of kGemmRepetitions
  std::vector<GemmShape> gemms;    // the last warm-up step's, in call order
};

// The flags of `zero3 train --backend cuda` that decide its training config, so that the bench
// steps what train would (the same defaults for everything the bench has no flag for).
TrainOptions train_options_for(const CudaStepBenchOptions& options) {
  TrainOptions train;
  train.backend = "cuda";
  train.micro_batch_size = options.micro_batch_size;
  train.bf16 = options.bf16;
  return train;
}

// Rank 0's step time and GEMMs, from `zero3 train`'s per-rank program. The GEMMs are those of the
// last warm-up step, so the timed steps carry no recording; the log starts after the step before
// it, or before the program when that step is the first (the program runs no GEMM before its
// first forward). The time runs from the end of the last warm-up step to the end of the last step:
// both ends are the same point of a step (its on_step, after the step's last host wait), so the
// work still in flight at each end is the same and the window holds timed_steps whole steps.
BenchFigures run_timed_steps(CudaRank& rank, const CudaStepBenchOptions& options, const TrainConfig& config,
                             BuiltModel& built) {
  const int64_t steps = options.warmup_steps + options.timed_steps;
  const int64_t recorded_step = options.warmup_steps - 1;
  const Stopwatch watch;
  double warmup_end_seconds = 0.0, last_end_seconds = 0.0;
  if (rank.rank == 0 && recorded_step == 0) rank.gemm_shapes.start();
  const RankProgramOptions program{
      .config = config,
      .seed = options.seed,
      .steps = steps,
      .global_ranks = rank.world,
      .on_step = [&](const StepStats& stats) {
        if (!std::isfinite(stats.loss)) {
          throw CorrectnessError("bench step --backend cuda: loss became " + std::to_string(stats.loss) +
                                 " at step " + std::to_string(stats.step));
        }
        if (stats.step + 1 == recorded_step) rank.gemm_shapes.start();
        if (stats.step == recorded_step) {
          rank.gemm_shapes.stop();
          warmup_end_seconds = watch.seconds();
        }
        if (stats.step + 1 == steps) last_end_seconds = watch.seconds();
      }};
  CountingAllocator memory;
  run_rank_program({.comm = &rank.comm, .allocator = memory, .kernels = rank.kernels}, built, program);
  rank.comm.synchronize();  // no collective pending: the GEMM timing waits for the compute stream unwatched
  BenchFigures figures;
  figures.step_seconds = (last_end_seconds - warmup_end_seconds) / static_cast<double>(options.timed_steps);
  figures.gemms = rank.gemm_shapes.shapes();
  return figures;
}

void print_header(const CudaRank& rank, const CudaStepBenchOptions& options) {
  std::printf("# zero3 bench step --backend cuda: %s; world %d (%s), rank 0 on cuda:%d %s\n",
              describe_cuda_backend().c_str(), rank.world,
              rank.launcher.empty() ? "one thread per GPU" : rank.launcher.c_str(), rank.device_index,
              rank.device_description.c_str());
  std::printf("# `zero3 train --backend cuda --model %s --seed %llu` (ZeRO-3): %lld warm-up steps, then %lld timed; "
              "ms/step: host time from the end of the last warm-up step to the end of the last step, per step\n",
              options.model.c_str(), static_cast<unsigned long long>(options.seed),
              static_cast<long long>(options.warmup_steps), static_cast<long long>(options.timed_steps));
  std::fflush(stdout);
}

double total_flops(const std::vector<GemmShape>& gemms) {
  double flops = 0.0;
  for (const GemmShape& gemm : gemms) flops += gemm.flops();
  return flops;
}

void print_table(const CudaStepBenchOptions& options, const TrainConfig& config, const BenchFigures& figures) {
  const StepThroughput& throughput = figures.throughput;
  std::printf("# GEMM-only: the %zu GEMMs (%.3g GFLOP) rank 0 ran in its last warm-up step, replayed alone through "
              "the same cuBLAS calls on fresh tensors of their shapes and dtypes, the fastest of %d passes timed by "
              "CUDA events\n#\n",
              figures.gemms.size(), total_flops(figures.gemms) / 1e9, kGemmRepetitions);
  std::printf("# %-14s %5s %5s %10s %12s %7s %13s %15s %10s\n", "model", "world", "dtype", "ms/step", "tokens/s", "MFU",
              "gemm_ms/step", "gemm_tokens/s", "step/gemm");
  char mfu[16] = "n/a";
  if (throughput.peak_flops > 0.0) {
    std::snprintf(mfu, sizeof(mfu), "%.1f%%",
                  100.0 * throughput.flops_per_step / figures.step_seconds / throughput.peak_flops);
  }
  std::printf("  %-14s %5d %5s %10.4g %12.6g %7s %13.4g %15.6g %10.3f\n", options.model.c_str(), figures.world,
              config.bf16 ? "bf16" : "f32", 1e3 * figures.step_seconds,
              throughput.tokens_per_step / figures.step_seconds, mfu, 1e3 * figures.gemm_only_seconds,
              throughput.tokens_per_step / figures.gemm_only_seconds, figures.gemm_only_seconds / figures.step_seconds);
  std::fflush(stdout);
}

// The distinct shapes in order of first call, each with its number of calls per step.
nlohmann::json gemm_shapes_json(const std::vector<GemmShape>& gemms) {
  std::vector<std::pair<GemmShape, int64_t>> counted;
  for (const GemmShape& gemm : gemms) {
    auto found = std::find_if(counted.begin(), counted.end(), [&](const auto& entry) { return entry.first == gemm; });
    if (found == counted.end()) counted.emplace_back(gemm, 1);
    else ++found->second;
  }
  nlohmann::json shapes = nlohmann::json::array();
  for (const auto& [gemm, calls] : counted) {
    shapes.push_back({{"shape", gemm.describe()}, {"calls_per_step", calls}, {"flops_per_call", gemm.flops()}});
  }
  return shapes;
}

void write_report(const CudaStepBenchOptions& options, const TrainConfig& config, const BenchFigures& figures) {
  const StepThroughput& throughput = figures.throughput;
  const bool peak_known = throughput.peak_flops > 0.0;
  const double gemm_flops = total_flops(figures.gemms);
  const nlohmann::json report = {
      {"backend", "cuda"},
      {"model", options.model},
      {"seed", options.seed},
      {"world", figures.world},
      {"launcher", figures.launcher},
      {"device", figures.device_description},
      {"dtype", config.bf16 ? "bf16" : "f32"},
      {"micro_batch", config.micro_batch_size},
      {"warmup_steps", options.warmup_steps},
      {"timed_steps", options.timed_steps},
      {"ms_per_step", 1e3 * figures.step_seconds},
      {"tokens_per_step", throughput.tokens_per_step},
      {"tokens_per_s", throughput.tokens_per_step / figures.step_seconds},
      {"model_flops_per_step", throughput.flops_per_step},
      {"peak_flops", peak_known ? nlohmann::json(throughput.peak_flops) : nlohmann::json(nullptr)},
      {"mfu", peak_known ? nlohmann::json(throughput.flops_per_step / figures.step_seconds / throughput.peak_flops)
                         : nlohmann::json(nullptr)},
      {"gemm_only_calls_per_step", figures.gemms.size()},
      {"gemm_only_flops_per_step", gemm_flops},
      {"gemm_only_ms_per_step", 1e3 * figures.gemm_only_seconds},
      {"gemm_only_tokens_per_s", throughput.tokens_per_step / figures.gemm_only_seconds},
      {"gemm_only_tflops_per_s", gemm_flops / figures.gemm_only_seconds / 1e12},
      {"gemm_only_repetitions", kGemmRepetitions},
      {"fraction_of_gemm_only_throughput", figures.gemm_only_seconds / figures.step_seconds},
      {"gemm_shapes", gemm_shapes_json(figures.gemms)}};
  write_file_atomically(options.report_path, report.dump(2) + "\n");
  std::printf("# report written to %s\n", options.report_path.c_str());
}

}  // namespace

void run_cuda_step_bench(const CudaStepBenchOptions& options) {
  ZERO3_CHECK(options.warmup_steps >= 1 && options.timed_steps >= 1, "the GEMMs are recorded in a warm-up step");
  const TrainOptions train = train_options_for(options);
  std::vector<std::string> warnings;  // from a config file, which the bench does not read
  const TrainConfig config = resolve_train_config(train, &warnings);
  // Bad input is exit 1 before any GPU is asked for: a model name or spec that does not build is
  // refused here, on the host, not inside a rank's thread on a machine that may have no GPU.
  (void)build_model(options.model, {.seed = options.seed, .micro_steps_per_step = config.gradient_accumulation_steps});
  std::optional<BenchFigures> measured;  // written by rank 0's thread only, read after every thread has ended
  run_on_cuda_ranks({.gpus = options.gpus, .bf16 = config.bf16}, [&](CudaRank& rank) {
    BuiltModel built = build_model(options.model, {.seed = options.seed,
                                                   .micro_steps_per_step = config.gradient_accumulation_steps});
    initialize_model(built, options.seed);
    if (rank.rank == 0) print_header(rank, options);
    BenchFigures figures = run_timed_steps(rank, options, config, built);
    if (rank.rank != 0) return;
    if (figures.gemms.empty()) {
      throw InputError("bench step --backend cuda: model " + options.model +
                       " ran no GEMM in a step, so there is no GEMM-only throughput to compare its step with");
    }
    figures.gemm_only_seconds = rank.time_gemms_seconds(figures.gemms, kGemmRepetitions);
    TrainOptions world_options = train;
    world_options.ranks = rank.world;
    figures.throughput = step_throughput(world_options, config, built, rank.peak_flops);
    figures.world = rank.world;
    figures.launcher = rank.launcher;
    figures.device_description = rank.device_description;
    measured = std::move(figures);
  });
  if (!measured) return;  // a launcher's process other than rank 0's: rank 0's process reports
  print_table(options, config, *measured);
  if (!options.report_path.empty()) write_report(options, config, *measured);
}

}  // namespace zero3
