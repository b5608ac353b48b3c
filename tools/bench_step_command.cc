// `zero3 bench step`: the ZeRO-3 engine's step time over the DDP reference's, both on the same
// simulated ranks, model and data, measured in the same run. The ratio is the figure of merit:
// what the sharding machinery (gathers, releases, bucketed reduce-scatter) costs per step.
#include <algorithm>
#include <cstdio>
#include <memory>

#include "core/base/atomic_file.h"
#include "core/base/stopwatch.h"
#include "core/base/errors.h"
#include "sim/distributed_training.h"
#include "tools/commands.h"
#include "tools/train_options.h"

namespace zero3 {

namespace {

struct BenchStepFlags {
  std::string model = "gpt-tiny";
  int ranks = 4;
  int64_t steps = 20;
  int rounds = 3;
  uint64_t seed = 1;
  std::string report_path;
  std::string device = "cpu";
};

// Seconds per step of the fastest of `rounds` runs (the least disturbed by the rest of the machine).
double seconds_per_step(const BenchStepFlags& flags, int zero_stage) {
  DistributedRunOptions options;
  options.model = flags.model;
  options.seed = flags.seed;
  options.world = flags.ranks;
  options.steps = flags.steps;
  options.device = simulated_device(flags.device);
  options.config.zero.stage = zero_stage;
  options.config.zero.persistence_threshold = 0;  // shard everything: the cost being measured
  double best = 1e30;
  for (int round = 0; round < flags.rounds; ++round) {
    const Stopwatch watch;
    const DistributedRunResult result = run_distributed(options);
    const double seconds = watch.seconds();
    if (!result.sim.all_ok()) throw CorrectnessError("bench step run failed: " + result.sim.root_cause());
    best = std::min(best, seconds / static_cast<double>(flags.steps));
  }
  return best;
}

void run_bench_step(const BenchStepFlags& flags) {
  std::printf("# bench step  model=%s ranks=%d steps=%lld rounds=%d seed=%llu device=%s (fastest round counts)\n",
              flags.model.c_str(), flags.ranks, static_cast<long long>(flags.steps), flags.rounds,
              static_cast<unsigned long long>(flags.seed), flags.device.c_str());
  const double ddp = seconds_per_step(flags, 0);
  const double zero3 = seconds_per_step(flags, 3);
  const double ratio = zero3 / ddp;
  std::printf("  ddp    %10.3f ms/step (all %d ranks, one process)\n", 1e3 * ddp, flags.ranks);
  std::printf("  zero3  %10.3f ms/step\n", 1e3 * zero3);
  std::printf("  ratio_zero3_over_ddp %.3f (target <= 1.15): %s\n", ratio, ratio <= 1.15 ? "met" : "NOT met");
  if (!flags.report_path.empty()) {
    const nlohmann::json report = {{"model", flags.model},     {"ranks", flags.ranks},
                                   {"steps", flags.steps},     {"seed", flags.seed},
                                   {"device", flags.device},
                                   {"ddp_s_per_step", ddp},    {"zero3_s_per_step", zero3},
                                   {"ratio_zero3_over_ddp", ratio}, {"target", 1.15}};
    write_file_atomically(flags.report_path, report.dump(2) + "\n");
  }
}

}  // namespace

void add_bench_step_command(CLI::App& bench_app) {
  auto flags = std::make_shared<BenchStepFlags>();
  CLI::App* command = bench_app.add_subcommand(
      "step", "ZeRO-3 step time over DDP-reference step time on the same simulated ranks, measured in one run");
  command->add_option("--model", flags->model, "built-in model name or JSON spec")->capture_default_str();
  command->add_option("--ranks", flags->ranks, "simulated ranks")->check(CLI::Range(1, 1024))->capture_default_str();
  command->add_option("--steps", flags->steps, "steps per timed run")->check(CLI::Range(int64_t{1}, int64_t{100000}))
      ->capture_default_str();
  command->add_option("--rounds", flags->rounds, "timed runs per engine; the fastest counts")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  command->add_option("--seed", flags->seed, "seed")->capture_default_str();
  add_simulated_device_option(*command, flags->device);
  command->add_option("--report", flags->report_path, "write the figures as JSON here (atomically)");
  command->callback([flags] { run_bench_step(*flags); });
}

}  // namespace zero3
