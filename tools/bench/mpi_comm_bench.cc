// Timed MPI collectives beside the simulator's (mpi_comm_bench.h).
#include "tools/bench/mpi_comm_bench.h"

#include <chrono>
#include <cstdio>
#include <iostream>
#include <thread>

#include "backend_cuda/mpi/mpi_world.h"
#include "core/base/atomic_file.h"
#include "core/base/errors.h"
#include "core/base/stopwatch.h"

namespace zero3 {

namespace {

constexpr int kRounds = 3;

struct MpiRow {
  CommBenchSize size;
  int iterations = 0;
  double time_us = 0.0;      // MPI, mean per collective in the fastest round (rank 0's clock)
  double busbw_gbps = 0.0;
  int64_t wrong = 0;         // over every rank
  double sim_time_us = 0.0;  // the simulator at the same size, in this session
  double sim_busbw_gbps = 0.0;
};

double busbw_gbps(int64_t bytes, double time_s, int world) {
  return static_cast<double>(bytes) / time_s / 1e9 * static_cast<double>(world - 1) / static_cast<double>(world);
}

// Every rank but 0 waits here without spinning, so that rank 0's simulated run has the cores.
void wait_sleeping(Communicator& comm, const CallSite& site) {
  const std::shared_ptr<Work> work = comm.barrier_async(site);
  while (!work->done()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

MpiRow measure(Communicator& comm, const CommBenchOptions& options, const CommBenchSize& size) {
  const int world = comm.world(), rank = comm.rank();
  MpiRow row{.size = size, .iterations = comm_bench_iterations(size.gather ? world * size.bytes : size.bytes)};
  const int64_t send_numel = size.gather ? size.count : size.count * world;
  Tensor send = Tensor::zeros({send_numel});
  Tensor recv = Tensor::zeros({size.gather ? size.count * world : size.count});
  for (int64_t i = 0; i < send_numel; ++i) send.data()[i] = comm_bench_value(options.seed, rank, i);
  const CallSite site{.module = "bench", .params = {}, .step = -1, .phase = size.op};
  const auto collective = [&] {
    if (size.gather) comm.all_gather(send, recv, site);
    else comm.reduce_scatter(send, recv, ReduceOp::sum, site);
  };
  collective();  // warm-up
  double best_s = 0.0;
  for (int round = 0; round < kRounds; ++round) {
    comm.barrier(site);
    const Stopwatch watch;
    for (int i = 0; i < row.iterations; ++i) collective();
    comm.barrier(site);
    const double round_s = watch.seconds() / row.iterations;
    best_s = round == 0 ? round_s : std::min(best_s, round_s);
  }
  Tensor wrong = Tensor::scalar(static_cast<float>(
      count_wrong_elements(size.gather, options.seed, rank, world, size.count, recv)));
  comm.all_reduce(wrong, ReduceOp::sum, site);
  row.wrong = static_cast<int64_t>(wrong.item());
  row.time_us = best_s * 1e6;
  row.busbw_gbps = busbw_gbps(size.bytes, best_s, world);
  if (rank == 0) {
    const CommBenchMeasurement sim = time_simulated_collective(size.gather, options, size.count, row.iterations);
    row.sim_time_us = sim.time_s * 1e6;
    row.sim_busbw_gbps = busbw_gbps(size.bytes, sim.time_s, world);
    row.wrong += sim.wrong;
    comm.barrier(site);
  } else {
    wait_sleeping(comm, site);
  }
  return row;
}

void print_header(const CommBenchOptions& options, const std::string& launcher) {
  std::printf("# zero3 bench comm --backend mpi: world %d (%s), seed %llu, sizes %s .. %s\n", options.world,
              launcher.empty() ? "no launcher" : launcher.c_str(), static_cast<unsigned long long>(options.seed),
              format_bytes(options.bytes_min).c_str(), format_bytes(options.bytes_max).c_str());
  std::printf("# one process per rank over MpiCommunicator; sim: the simulator at the same size, run by rank 0 in this\n"
              "# session; ratio = MPI busbw / sim busbw. time(us): mean per collective over the fastest of %d rounds\n#\n",
              kRounds);
  std::printf("# %-15s %12s %11s %6s %11s %12s %12s %7s %13s %13s %7s\n", "op", "size", "count", "iters", "time(us)",
              "algbw(GB/s)", "busbw(GB/s)", "#wrong", "sim time(us)", "sim busbw", "ratio");
  std::fflush(stdout);
}

}  // namespace

void run_mpi_comm_bench(CommBenchOptions options, const std::string& report_path) {
  MpiWorld& mpi = MpiWorld::start();
  if (options.world != 0 && options.world != mpi.world()) {
    throw InputError("bench comm: --ranks " + std::to_string(options.world) + " but the launcher started " +
                     std::to_string(mpi.world()) + " processes");
  }
  options.world = mpi.world();
  check_comm_bench_options(options);
  const std::unique_ptr<Communicator> comm = mpi.communicator({});
  const bool prints = mpi.rank() == 0;
  if (prints) print_header(options, mpi.launch().launcher);
  nlohmann::json rows = nlohmann::json::array();
  int64_t wrong_total = 0;
  std::vector<std::string> skipped;
  for (const CommBenchSize& size : comm_bench_sizes(options, &skipped)) {
    if (!size.skipped.empty()) {
      if (prints) std::printf("# skipped %s\n", size.skipped.c_str());
      continue;
    }
    const MpiRow row = measure(*comm, options, size);
    wrong_total += row.wrong;
    if (!prints) continue;
    const double algbw = static_cast<double>(size.bytes) / (row.time_us * 1e-6) / 1e9;
    const double ratio = row.busbw_gbps / row.sim_busbw_gbps;
    std::printf("  %-15s %12lld %11lld %6d %11.2f %12.3f %12.3f %7lld %13.2f %13.3f %7.3f\n", size.op.c_str(),
                static_cast<long long>(size.bytes), static_cast<long long>(size.count), row.iterations, row.time_us,
                algbw, row.busbw_gbps, static_cast<long long>(row.wrong), row.sim_time_us, row.sim_busbw_gbps, ratio);
    std::fflush(stdout);
    rows.push_back({{"op", size.op}, {"bytes", size.bytes}, {"count", size.count}, {"iterations", row.iterations},
                    {"time_us", row.time_us}, {"algbw_gbps", algbw}, {"busbw_gbps", row.busbw_gbps},
                    {"wrong", row.wrong}, {"sim_time_us", row.sim_time_us}, {"sim_busbw_gbps", row.sim_busbw_gbps},
                    {"ratio_to_sim_busbw", ratio}});
  }
  comm->synchronize();
  if (prints && !report_path.empty()) {
    const nlohmann::json report = {{"backend", "mpi"}, {"world", options.world}, {"seed", options.seed},
                                   {"rows", rows}, {"skipped", skipped}};
    write_file_atomically(report_path, report.dump(2) + "\n");
    std::printf("# report written to %s\n", report_path.c_str());
  }
  if (wrong_total > 0) {
    throw CorrectnessError("bench comm --backend mpi: " + std::to_string(wrong_total) +
                           " elements differ from the values expected from (seed, rank, index); see #wrong");
  }
}

}  // namespace zero3
