// Timed NCCL collectives with checked values (cuda_comm_bench.h).
#include "tools/bench/cuda_comm_bench.h"

#include <algorithm>
#include <cstdio>

#include "backend_cuda/cuda/cuda_world.h"
#include "core/base/atomic_file.h"
#include "core/base/errors.h"
#include "core/base/stopwatch.h"

namespace zero3 {

namespace {

constexpr int kRounds = 3;

enum class Collective { all_gather, reduce_scatter, all_reduce };

struct Row {
  const char* op = "";
  int64_t bytes = 0;
  int64_t count = 0;
  int iterations = 0;
  double time_us = 0.0;
  double algbw_gbps = 0.0;
  double busbw_gbps = 0.0;
  int64_t wrong = 0;
};

// nccl-tests' bus bandwidth: what each link carries, comparable across world sizes.
double bus_factor(Collective collective, int world) {
  const double w = world;
  return collective == Collective::all_reduce ? 2.0 * (w - 1.0) / w : (w - 1.0) / w;
}

Tensor host_values(uint64_t seed, int rank, int64_t numel) {
  Tensor host = Tensor::zeros({numel});
  for (int64_t i = 0; i < numel; ++i) host.data()[i] = comm_bench_value(seed, rank, i);
  return host;
}

int64_t count_wrong_sums(uint64_t seed, int world, const Tensor& result) {
  int64_t wrong = 0;
  const float* values = result.data();
  for (int64_t i = 0; i < result.numel(); ++i) {
    float expected = 0.0f;
    for (int r = 0; r < world; ++r) expected += comm_bench_value(seed, r, i);
    wrong += values[i] != expected;
  }
  return wrong;
}

// One collective's run on this rank's buffers; the all-reduce runs in place on `recv`.
void issue(Collective collective, CudaRank& rank, const Tensor& send, Tensor& recv, const CallSite& site) {
  if (collective == Collective::all_gather) rank.comm.all_gather_async(send, recv, site);
  else if (collective == Collective::reduce_scatter) rank.comm.reduce_scatter_async(send, recv, ReduceOp::sum, site);
  else rank.comm.all_reduce_async(recv, ReduceOp::sum, site);
}

// The fastest of kRounds rounds of `iterations` collectives, each round ended by the host waiting
// for the comm stream (synchronize), then one fresh collective whose output is checked.
Row measure(CudaRank& rank, Collective collective, const char* op, int64_t bytes, uint64_t seed) {
  const int world = rank.world;
  const int64_t count = bytes / 4 / (collective == Collective::all_reduce ? 1 : world);
  const int64_t send_numel = collective == Collective::reduce_scatter ? count * world : count;
  const int64_t recv_numel = collective == Collective::all_gather ? count * world : count;
  Row row{.op = op, .bytes = bytes, .count = count,
          .iterations = comm_bench_iterations(collective == Collective::all_gather ? bytes * world : bytes)};
  const Tensor send = rank.kernels.copy_to_device(host_values(seed, rank.rank, send_numel));
  Tensor recv = collective == Collective::all_reduce ? rank.kernels.copy_to_device(host_values(seed, rank.rank, count))
                                                     : Tensor::zeros({recv_numel}, DType::f32, rank.kernels.device());
  const CallSite site{.module = "bench", .params = {}, .step = -1, .phase = op};
  issue(collective, rank, send, recv, site);  // warm-up
  rank.comm.synchronize();
  double best_s = 0.0;
  for (int round = 0; round < kRounds; ++round) {
    rank.comm.barrier(site);
    const Stopwatch watch;
    for (int i = 0; i < row.iterations; ++i) issue(collective, rank, send, recv, site);
    rank.comm.synchronize();
    const double round_s = watch.seconds() / row.iterations;
    best_s = round == 0 ? round_s : std::min(best_s, round_s);
  }
  // The timed in-place all-reduces summed sums; the check starts again from the generated values.
  if (collective == Collective::all_reduce) recv = rank.kernels.copy_to_device(host_values(seed, rank.rank, count));
  issue(collective, rank, send, recv, site);
  rank.comm.synchronize();  // the host waited for the comm stream: the download below reads the result
  const Tensor result = rank.kernels.to_host(recv);
  const int64_t wrong = collective == Collective::all_reduce
                            ? count_wrong_sums(seed, world, result)
                            : count_wrong_elements(collective == Collective::all_gather, seed, rank.rank, world, count,
                                                   result);
  Tensor wrong_total = rank.kernels.copy_to_device(Tensor::scalar(static_cast<float>(wrong)));
  rank.comm.all_reduce(wrong_total, ReduceOp::sum, site);  // wait() orders the download after it
  row.wrong = static_cast<int64_t>(rank.kernels.to_host(wrong_total).item());
  row.time_us = best_s * 1e6;
  row.algbw_gbps = static_cast<double>(bytes) / best_s / 1e9;
  row.busbw_gbps = row.algbw_gbps * bus_factor(collective, world);
  return row;
}

void print_row(const Row& row) {
  std::printf("  %-15s %12lld %11lld %6d %11.2f %12.3f %12.3f %7lld\n", row.op, static_cast<long long>(row.bytes),
              static_cast<long long>(row.count), row.iterations, row.time_us, row.algbw_gbps, row.busbw_gbps,
              static_cast<long long>(row.wrong));
  std::fflush(stdout);
}

nlohmann::json row_json(const Row& row) {
  return {{"op", row.op},           {"bytes", row.bytes},           {"count", row.count},
          {"iterations", row.iterations}, {"time_us", row.time_us}, {"algbw_gbps", row.algbw_gbps},
          {"busbw_gbps", row.busbw_gbps}, {"wrong", row.wrong}};
}

// Sizes from bytes_min by 4x to bytes_max, each a whole number of f32 elements per rank block.
std::vector<int64_t> sizes_for(const CommBenchOptions& sizes, int world) {
  std::vector<int64_t> out;
  for (int64_t bytes = sizes.bytes_min; bytes <= sizes.bytes_max; bytes *= 4) {
    const int64_t granule = int64_t{4} * world;
    out.push_back(std::max(granule, bytes / granule * granule));
  }
  return out;
}

}  // namespace

void run_cuda_comm_bench(const CudaCommBenchOptions& options) {
  CudaRunOptions run;
  if (options.sizes.world != 0) run.gpus = options.sizes.world;
  nlohmann::json rows = nlohmann::json::array();
  int64_t wrong_total = 0;
  run_on_cuda_ranks(run, [&](CudaRank& rank) {
    const bool prints = rank.rank == 0;
    if (prints) {
      std::printf("# zero3 bench comm --backend cuda: %s; world %d (%s), rank 0 on cuda:%d %s\n",
                  describe_cuda_backend().c_str(), rank.world,
                  rank.launcher.empty() ? "one thread per GPU" : rank.launcher.c_str(), rank.device_index,
                  rank.device_description.c_str());
    }
    if (options.describe_only) return;
    if (prints) {
      std::printf("# NcclCommunicator on each GPU's comm stream; time(us): mean per collective over the fastest of %d "
                  "rounds, host-timed to the comm stream's end; busbw as nccl-tests (x(W-1)/W, all_reduce x2(W-1)/W)\n#\n",
                  kRounds);
      std::printf("# %-15s %12s %11s %6s %11s %12s %12s %7s\n", "op", "size", "count", "iters", "time(us)",
                  "algbw(GB/s)", "busbw(GB/s)", "#wrong");
    }
    const struct {
      Collective collective;
      const char* op;
    } kinds[] = {{Collective::all_gather, "all_gather"},
                 {Collective::reduce_scatter, "reduce_scatter"},
                 {Collective::all_reduce, "all_reduce"}};
    for (const auto& kind : kinds) {
      for (const int64_t bytes : sizes_for(options.sizes, rank.world)) {
        const Row row = measure(rank, kind.collective, kind.op, bytes, options.sizes.seed);
        if (!prints) continue;
        print_row(row);
        rows.push_back(row_json(row));
        wrong_total += row.wrong;
      }
    }
  });
  if (!options.report_path.empty() && !options.describe_only) {
    write_file_atomically(options.report_path,
                          nlohmann::json{{"backend", "cuda"}, {"seed", options.sizes.seed}, {"rows", rows}}.dump(2) + "\n");
    std::printf("# report written to %s\n", options.report_path.c_str());
  }
  if (wrong_total > 0) {
    throw CorrectnessError("bench comm --backend cuda: " + std::to_string(wrong_total) +
                           " elements differ from the values expected from (seed, rank, index); see #wrong");
  }
}

}  // namespace zero3
