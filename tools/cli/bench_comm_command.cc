// Flags of `zero3 bench comm` and the run behind them.
#include "tools/cli/bench_comm_command.h"

#include <cmath>
#include <iostream>
#include <memory>

#include "core/base/errors.h"
#include "tools/bench/comm_bench.h"
#include "tools/bench/cuda_comm_bench.h"
#include "tools/bench/mpi_comm_bench.h"
#include "tools/runs/mpi_training_run.h"

namespace zero3 {

namespace {

struct BenchCommFlags {
  std::string backend = "sim";
  CommBenchOptions options{.world = 0};
  double memory_gib_max = 8.0;
  std::string report_path;
  bool describe = false;
};

void run_bench_comm(const BenchCommFlags& flags) {
  CommBenchOptions options = flags.options;
  options.memory_bytes_max = static_cast<int64_t>(std::llround(flags.memory_gib_max * double(int64_t{1} << 30)));
  if (flags.describe && flags.backend != "cuda") throw InputError("bench comm: --describe is for --backend cuda");
  if (flags.backend == "mpi") {
    run_as_mpi_process([&] { run_mpi_comm_bench(options, flags.report_path); });
    return;
  }
  if (flags.backend == "cuda") {
    run_cuda_comm_bench({.sizes = options, .report_path = flags.report_path, .describe_only = flags.describe});
    return;
  }
  if (options.world == 0) throw InputError("bench comm: --ranks is required with --backend sim");
  const CommBenchResult result = run_comm_bench(options, std::cout);
  if (!flags.report_path.empty()) {
    write_comm_bench_report(result, flags.report_path);
    std::cout << "# report written to " << flags.report_path << "\n";
  }
  if (result.wrong_total() > 0) {
    throw CorrectnessError("bench comm: " + std::to_string(result.wrong_total()) +
                           " elements differ from the values expected from (seed, rank, index); see #wrong");
  }
}

}  // namespace

void add_bench_comm_command(CLI::App& bench_app) {
  auto flags = std::make_shared<BenchCommFlags>();
  CLI::App* command = bench_app.add_subcommand(
      "comm", "all_gather and reduce_scatter, nccl-tests style: over simulated ranks in this process, with the\n"
              "ratio of bytes delivered per second to this machine's memcpy bandwidth; or (--backend mpi, under\n"
              "mpirun -np W) over one process per rank, with the ratio to the simulator at the same sizes; or\n"
              "(--backend cuda) over NCCL on this machine's GPUs, all_reduce too, nccl-tests' columns");
  command->add_option("--backend", flags->backend,
                      "sim: simulated ranks; mpi: one process per rank under mpirun; cuda: NCCL, one thread per GPU "
                      "(--ranks GPUs, default all) or one process per GPU under torchrun/srun/mpirun")
      ->check(CLI::IsMember({"sim", "mpi", "cuda"}))
      ->capture_default_str();
  command->add_option("--ranks", flags->options.world, "world size (sim: required; mpi: the launcher's, which this may only repeat)")
      ->check(CLI::Range(1, 4096));
  command->add_flag("--describe", flags->describe,
                    "cuda: print the CUDA runtime, NCCL and device line, and stop (exit 4 without a GPU)");
  command->add_option("--report", flags->report_path, "also write the results as JSON to this file (atomically)");
  command->add_option("--seed", flags->options.seed, "seed of the checked values")->capture_default_str();
  command->add_option("--min-bytes", flags->options.bytes_min, "smallest size (whole buffer, bytes)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{4}, int64_t{1} << 40));
  command->add_option("--max-bytes", flags->options.bytes_max, "largest size; sizes grow 4x from the smallest")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{4}, int64_t{1} << 40));
  command->add_option("--memory-max-gib", flags->memory_gib_max,
                      "buffers of all ranks for one size must fit in this; larger sizes are skipped")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 1e6));
  command->callback([flags] { run_bench_comm(*flags); });
}

}  // namespace zero3
