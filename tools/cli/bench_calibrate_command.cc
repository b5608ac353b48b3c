// `zero3 bench calibrate`: the machine's measured hardware profile (tools/bench/calibrate.h).
#include <iostream>
#include <memory>

#include "backend_cuda/mpi/mpi_world.h"
#include "core/base/atomic_file.h"
#include "core/base/errors.h"
#include "sim/sim_world.h"
#include "tools/bench/calibrate.h"
#include "tools/cli/commands.h"
#include "tools/runs/mpi_training_run.h"

namespace zero3 {

namespace {

struct CalibrateFlags {
  CalibrateOptions options;
  int ranks = 0;
  std::string out_path;
};

void write_profile(const nlohmann::json& profile, const std::string& path) {
  write_file_atomically(path, profile.dump(2) + "\n");
  std::cerr << "calibrate: profile written to " << path << " (zero3 replay TRACE --hardware " << path << ")\n";
}

void run_calibrate(const CalibrateFlags& flags) {
  CalibrateOptions options = flags.options;
  if (options.backend == "cuda") {
    throw InputError("bench calibrate --backend cuda is not built yet: the GPU's profile is the datasheet's "
                     "(traces/hardware/h100.json); measure the machine with --backend mpi or sim");
  }
  if (options.backend == "mpi") {
    run_as_mpi_process([&] {
      MpiWorld& mpi = MpiWorld::start();
      if (flags.ranks != 0 && flags.ranks != mpi.world()) {
        throw InputError("bench calibrate: --ranks " + std::to_string(flags.ranks) + " but the launcher started " +
                         std::to_string(mpi.world()) + " processes");
      }
      std::unique_ptr<Communicator> comm = mpi.communicator({});
      const nlohmann::json profile = calibrate_machine(*comm, cpu_kernels(), options, std::cerr);
      if (comm->rank() == 0) write_profile(profile, flags.out_path);
    });
    return;
  }
  // sim: the compute of this one process; the simulator prices collectives with its own model.
  if (flags.ranks > 1) throw InputError("bench calibrate --backend sim measures one process: leave --ranks out");
  options.measure_collectives = false;
  nlohmann::json profile;
  SimWorld world({.world = 1, .fiber_stack_bytes = size_t{8} << 20});
  const SimResult result = world.run([&](SimRank& rank) { profile = calibrate_machine(rank.comm(), cpu_kernels(), options, std::cerr); });
  if (!result.all_ok()) std::rethrow_exception(result.ranks.front().exception);
  write_profile(profile, flags.out_path);
}

}  // namespace

void add_bench_calibrate_command(CLI::App& bench_app) {
  auto flags = std::make_shared<CalibrateFlags>();
  CLI::App* command = bench_app.add_subcommand(
      "calibrate", "Measure this machine's hardware profile for replay: GEMM throughput at a model's shapes, memory\n"
                   "bandwidth, AdamW's rate and (--backend mpi, under mpirun -np W) each collective's time, with the\n"
                   "ring model's latency and bandwidth fitted to them; every rank measures at once, as W ranks train.\n"
                   "Example: mpirun -np 4 zero3 bench calibrate --backend mpi --model gpt-tiny --out cpu4.json,\n"
                   "then zero3 replay TRACE --ranks 4 --hardware cpu4.json");
  command->add_option("--backend", flags->options.backend, "mpi: one process per rank under mpirun; sim: this process")
      ->check(CLI::IsMember({"mpi", "sim", "cuda"}))
      ->capture_default_str();
  command->add_option("--ranks", flags->ranks, "mpi: the launcher's world size, which this may only repeat")
      ->check(CLI::Range(1, 4096));
  command->add_option("--model", flags->options.model, "built-in model or spec whose GEMM shapes are timed")
      ->capture_default_str();
  command->add_option("--micro-batch", flags->options.micro_batch, "sequences (gpt) or rows per rank and micro-step")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  command->add_option("--seconds-per-figure", flags->options.seconds_per_figure,
                      "about how long each timing repeats its operation (3 rounds, the fastest kept)")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 60.0));
  command->add_option("--out", flags->out_path, "the profile's JSON file (traces/hardware's format)")->required();
  command->callback([flags] { run_calibrate(*flags); });
}

}  // namespace zero3
