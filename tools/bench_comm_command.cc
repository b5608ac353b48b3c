// Flags of `zero3 bench comm` and the run behind them.
#include "tools/bench_comm_command.h"

#include <cmath>
#include <iostream>
#include <memory>

#include "core/base/errors.h"
#include "sim/comm_bench.h"

namespace zero3 {

namespace {

struct BenchCommFlags {
  CommBenchOptions options;
  double memory_gib_max = 8.0;
  std::string report_path;
};

void run_bench_comm(const BenchCommFlags& flags) {
  CommBenchOptions options = flags.options;
  options.memory_bytes_max = static_cast<int64_t>(std::llround(flags.memory_gib_max * double(int64_t{1} << 30)));
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
      "comm", "all_gather and reduce_scatter over simulated ranks in this process, nccl-tests style, with the\n"
              "ratio of bytes delivered per second to this machine's memcpy bandwidth");
  command->add_option("--ranks", flags->options.world, "simulated ranks (world size)")
      ->required()
      ->check(CLI::Range(1, 4096));
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
