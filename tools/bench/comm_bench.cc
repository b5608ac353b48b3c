// Timed collectives over a SimWorld, checked element by element, next to memcpy.
#include "tools/bench/comm_bench.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "core/base/stopwatch.h"
#include "core/base/atomic_file.h"
#include "core/base/errors.h"
#include "core/base/rng.h"
#include "sim/sim_world.h"

namespace zero3 {

namespace {


constexpr int64_t kBytesPerElement = 4;
// Enough repetitions per round to move about this much per size, within [kIterationsMin, kIterationsMax].
constexpr int64_t kBytesPerSize = int64_t{2} << 30;
constexpr int kIterationsMin = 3;
constexpr int kIterationsMax = 1000;  // small sizes: rounds of a few ms, not 0.2 ms a timer tick can double
constexpr int kRounds = 5;

}  // namespace

float comm_bench_value(uint64_t seed, int rank, int64_t index) {
  // Small integers in [-8, 8], so sums over up to 2^20 ranks stay exact in f32.
  const uint64_t bits = mix64(seed, static_cast<uint64_t>(rank), static_cast<uint64_t>(index));
  return static_cast<float>(static_cast<int64_t>(bits % 17) - 8);
}

int comm_bench_iterations(int64_t delivered_bytes) {
  return static_cast<int>(std::clamp<int64_t>(kBytesPerSize / std::max<int64_t>(delivered_bytes, 1), kIterationsMin,
                                              kIterationsMax));
}

std::string format_bytes(int64_t bytes) {
  char text[32];
  if (bytes >= (int64_t{1} << 30)) {
    std::snprintf(text, sizeof(text), "%.1f GiB", static_cast<double>(bytes) / (1 << 30));
  } else if (bytes >= (1 << 20)) {
    std::snprintf(text, sizeof(text), "%lld MiB", static_cast<long long>(bytes >> 20));
  } else {
    std::snprintf(text, sizeof(text), "%lld KiB", static_cast<long long>(bytes >> 10));
  }
  return text;
}

namespace {

// memcpy bandwidth in GB/s for copying a `bytes` source into each of `copies` destinations, on
// buffers touched beforehand, the fastest of kRounds rounds: the memcpys a collective delivering
// `copies` buffers of `bytes` needs at the least, over the same amount of memory.
double measure_memcpy_gbps(int64_t bytes, int copies, int iterations) {
  std::vector<char> source(static_cast<size_t>(bytes), 1);
  std::vector<std::vector<char>> destinations(static_cast<size_t>(copies), std::vector<char>(source.size(), 0));
  for (std::vector<char>& destination : destinations) std::memcpy(destination.data(), source.data(), source.size());
  double best_s = 0.0;
  for (int round = 0; round < kRounds; ++round) {
    const Stopwatch watch;
    for (int i = 0; i < iterations; ++i) {
      source[static_cast<size_t>(i) % source.size()] = static_cast<char>(i);  // keeps the copies from being merged
      for (std::vector<char>& destination : destinations) {
        std::memcpy(destination.data(), source.data(), source.size());
        // The destination is never read otherwise: tell the compiler it escapes, so that no copy
        // is dropped as a dead store.
        asm volatile("" : : "r"(destination.data()) : "memory");
      }
    }
    const double elapsed_s = watch.seconds();
    best_s = round == 0 ? elapsed_s : std::min(best_s, elapsed_s);
  }
  return static_cast<double>(bytes) * copies * iterations / best_s / 1e9;
}

}  // namespace

int64_t count_wrong_elements(bool gather, uint64_t seed, int rank, int world, int64_t count, const Tensor& recv) {
  const float* values = recv.data();
  int64_t wrong = 0;
  if (gather) {
    for (int block = 0; block < world; ++block) {
      for (int64_t j = 0; j < count; ++j) wrong += values[block * count + j] != comm_bench_value(seed, block, j);
    }
    return wrong;
  }
  for (int64_t j = 0; j < count; ++j) {
    float expected = 0.0f;
    for (int source = 0; source < world; ++source) expected += comm_bench_value(seed, source, rank * count + j);
    wrong += values[j] != expected;
  }
  return wrong;
}

CommBenchMeasurement time_simulated_collective(bool gather, const CommBenchOptions& options, int64_t count,
                                               int iterations) {
  std::vector<double> round_time_s(kRounds, 0.0);
  std::vector<int64_t> wrong_by_rank(static_cast<size_t>(options.world), 0);
  Stopwatch watch;
  SimWorld world(SimOptions{.world = options.world, .seed = options.seed});
  const SimResult result = world.run([&](SimRank& sim) {
    const int64_t send_numel = gather ? count : count * sim.world();
    Tensor send = Tensor::zeros({send_numel});
    Tensor recv = Tensor::zeros({gather ? count * sim.world() : count});
    float* send_values = send.data();
    for (int64_t i = 0; i < send_numel; ++i) send_values[i] = comm_bench_value(options.seed, sim.rank(), i);
    const CallSite site{.module = "bench", .params = {}, .step = -1, .phase = gather ? "all_gather" : "reduce_scatter"};
    const auto collective = [&] {
      if (gather) {
        sim.comm().all_gather(send, recv, site);
      } else {
        sim.comm().reduce_scatter(send, recv, ReduceOp::sum, site);
      }
    };
    collective();  // warm-up: first touch of the pages, caches
    for (double& time_s : round_time_s) {
      // Rank 0 starts the clock once the previous collective completed, which moved every rank's data.
      if (sim.rank() == 0) watch.restart();
      sim.comm().barrier(site);
      for (int i = 0; i < iterations; ++i) collective();
      sim.comm().barrier(site);
      // The first rank past the barrier stops the clock, before any rank goes on to other work.
      if (time_s == 0.0) time_s = watch.seconds() / iterations;
    }
    wrong_by_rank[static_cast<size_t>(sim.rank())] =
        count_wrong_elements(gather, options.seed, sim.rank(), sim.world(), count, recv);
  });
  if (!result.all_ok()) throw CorrectnessError("bench comm: the simulated run failed\n" + result.summary());
  CommBenchMeasurement measurement{.time_s = *std::min_element(round_time_s.begin(), round_time_s.end()), .wrong = 0};
  for (int64_t wrong : wrong_by_rank) measurement.wrong += wrong;
  return measurement;
}

namespace {

void print_header(const CommBenchOptions& options, std::ostream& out) {
  out << "# zero3 bench comm: world " << options.world << ", seed " << options.seed << ", sizes "
      << format_bytes(options.bytes_min) << " .. " << format_bytes(options.bytes_max) << ", buffer budget "
      << format_bytes(options.memory_bytes_max) << "\n"
      << "# simulated ranks in one process: one thread moves every rank's data, so ratio = (bytes received by all"
         " ranks / time) / memcpy bandwidth, copying the same bytes into as many buffers (world for all_gather)\n"
      << "# received: world * size for all_gather, size for reduce_scatter; time(us): mean per collective over the"
         " fastest of " << kRounds << " rounds\n"
      << "#\n";
  char line[200];
  std::snprintf(line, sizeof(line), "# %-15s %12s %11s %6s %11s %12s %12s %7s %13s %6s\n", "op", "size", "count",
                "iters", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong", "memcpy(GB/s)", "ratio");
  out << line << std::flush;
}

void print_row(const CommBenchRow& row, std::ostream& out) {
  char line[200];
  std::snprintf(line, sizeof(line), "  %-15s %12lld %11lld %6d %11.2f %12.3f %12.3f %7lld %13.3f %6.3f\n",
                row.op.c_str(), static_cast<long long>(row.bytes), static_cast<long long>(row.count), row.iterations,
                row.time_us, row.algbw_gbps, row.busbw_gbps, static_cast<long long>(row.wrong), row.memcpy_gbps,
                row.ratio_to_memcpy);
  out << line << std::flush;
}

// Issue 16's target: at 1 MiB and up, an all-gather delivers its bytes at least 0.9x as fast as
// memcpy copies them into as many buffers.
constexpr int64_t kLargeBytes = int64_t{1} << 20;
constexpr double kLargeGatherRatioTarget = 0.9;

// The worst ratio of `op` at kLargeBytes and up; false when none ran.
bool worst_large_ratio(const CommBenchResult& result, const std::string& op, double* ratio_min) {
  bool any = false;
  for (const CommBenchRow& row : result.rows) {
    if (row.op != op || row.bytes < kLargeBytes) continue;
    *ratio_min = any ? std::min(*ratio_min, row.ratio_to_memcpy) : row.ratio_to_memcpy;
    any = true;
  }
  return any;
}

// The headline numbers: how close large all-gathers come to memcpy, and large reduce-scatters to
// what their memory traffic allows.
void print_large_ratios(const CommBenchResult& result, std::ostream& out) {
  double gather_min = 0.0, scatter_min = 0.0;
  char line[400];
  if (!worst_large_ratio(result, "all_gather", &gather_min)) {
    out << "# no all_gather of " << format_bytes(kLargeBytes) << " or more was run\n";
  } else {
    std::snprintf(line, sizeof(line), "# all_gather >= %s: ratio_to_memcpy %.3f at worst (target >= %.1f): %s\n",
                  format_bytes(kLargeBytes).c_str(), gather_min, kLargeGatherRatioTarget,
                  gather_min >= kLargeGatherRatioTarget ? "met" : "NOT met");
    out << line;
  }
  if (worst_large_ratio(result, "reduce_scatter", &scatter_min)) {
    // A reduce-scatter reads every rank's whole buffer, world x the bytes it delivers, and writes
    // them once: (world + 1) bytes moved per byte delivered where memcpy moves 2. At memory speed
    // its ratio is 2 / (world + 1), whatever the implementation.
    const double world = static_cast<double>(result.options.world);
    const double bound = 2.0 / (world + 1.0);
    std::snprintf(line, sizeof(line),
                  "# reduce_scatter >= %s: ratio_to_memcpy %.3f at worst; reading %gx the bytes it delivers, "
                  "memory speed would give %.3f (2 / (world + 1)): %.2f of that\n",
                  format_bytes(kLargeBytes).c_str(), scatter_min, world, bound, scatter_min / bound);
    out << line;
  }
  out << std::flush;
}

}  // namespace

void check_comm_bench_options(const CommBenchOptions& options) {
  if (options.world < 1 || options.world > 4096) {
    throw InputError("bench comm: --ranks must be in [1, 4096], got " + std::to_string(options.world));
  }
  if (options.bytes_min < kBytesPerElement || options.bytes_max < options.bytes_min) {
    throw InputError("bench comm: sizes must satisfy 4 <= min <= max, got " + std::to_string(options.bytes_min) +
                     " .. " + std::to_string(options.bytes_max));
  }
  if (options.memory_bytes_max <= 0) {
    throw InputError("bench comm: the buffer budget must be positive, got " + std::to_string(options.memory_bytes_max));
  }
}

int64_t CommBenchResult::wrong_total() const {
  int64_t wrong = 0;
  for (const CommBenchRow& row : rows) wrong += row.wrong;
  return wrong;
}

std::vector<CommBenchSize> comm_bench_sizes(const CommBenchOptions& options, std::vector<std::string>* skipped) {
  std::vector<CommBenchSize> sizes;
  const int64_t world = options.world;
  for (const bool gather : {true, false}) {
    const std::string op = gather ? "all_gather" : "reduce_scatter";
    for (int64_t size = options.bytes_min; size <= options.bytes_max; size *= 4) {
      CommBenchSize entry{.op = op, .gather = gather, .count = size / (kBytesPerElement * world)};
      entry.bytes = entry.count * kBytesPerElement * world;
      // Every rank holds a whole buffer and a block. The memcpy baseline needs a source and a
      // destination per receiving buffer, at most as much, once the simulation has freed its own:
      // counting two more whole buffers on top bounds both.
      const int64_t needed_bytes = (world + 1) * entry.bytes + 2 * entry.bytes;
      if (entry.count == 0 || needed_bytes > options.memory_bytes_max) {
        const std::string reason =
            entry.count == 0 ? "fewer than one element per rank"
                             : "needs " + format_bytes(needed_bytes) + " of buffers, over the budget of " +
                                   format_bytes(options.memory_bytes_max);
        entry.skipped = op + " " + format_bytes(size) + ": " + reason;
        if (skipped) skipped->push_back(entry.skipped);
      }
      sizes.push_back(entry);
    }
  }
  return sizes;
}

CommBenchResult run_comm_bench(const CommBenchOptions& options, std::ostream& out) {
  check_comm_bench_options(options);
  CommBenchResult result{.options = options};
  print_header(options, out);
  for (const CommBenchSize& size : comm_bench_sizes(options, &result.skipped)) {
    if (!size.skipped.empty()) {
      out << "# skipped " << size.skipped << "\n";
      continue;
    }
    const int64_t world = options.world, bytes = size.bytes;
    CommBenchRow row{.op = size.op, .bytes = bytes, .count = size.count,
                     .iterations = comm_bench_iterations(world * bytes),
                     .delivered_bytes = size.gather ? world * bytes : bytes};
    const CommBenchMeasurement measurement = time_simulated_collective(size.gather, options, size.count, row.iterations);
    row.time_us = measurement.time_s * 1e6;
    row.algbw_gbps = static_cast<double>(bytes) / measurement.time_s / 1e9;
    row.busbw_gbps = row.algbw_gbps * static_cast<double>(world - 1) / static_cast<double>(world);
    row.wrong = measurement.wrong;
    // The same bytes into as many buffers as the ranks receive: a gather's whole buffer on every
    // rank, a reduce-scatter's blocks once in all.
    const int copies = size.gather ? options.world : 1;
    row.memcpy_gbps = measure_memcpy_gbps(bytes, copies, comm_bench_iterations(row.delivered_bytes));
    row.ratio_to_memcpy = static_cast<double>(row.delivered_bytes) / measurement.time_s / 1e9 / row.memcpy_gbps;
    print_row(row, out);
    result.rows.push_back(row);
  }
  print_large_ratios(result, out);
  return result;
}

nlohmann::json CommBenchResult::to_json() const {
  nlohmann::json rows_json = nlohmann::json::array();
  nlohmann::json ratios = nlohmann::json::object();
  for (const CommBenchRow& row : rows) {
    rows_json.push_back({{"op", row.op},
                         {"bytes", row.bytes},
                         {"count", row.count},
                         {"iterations", row.iterations},
                         {"delivered_bytes", row.delivered_bytes},
                         {"time_us", row.time_us},
                         {"algbw_gbps", row.algbw_gbps},
                         {"busbw_gbps", row.busbw_gbps},
                         {"wrong", row.wrong},
                         {"memcpy_gbps", row.memcpy_gbps},
                         {"ratio_to_memcpy", row.ratio_to_memcpy}});
    ratios[row.op][std::to_string(row.bytes)] = row.ratio_to_memcpy;
  }
  return {{"world", options.world},
          {"seed", options.seed},
          {"memory_bytes_max", options.memory_bytes_max},
          {"rows", std::move(rows_json)},
          {"skipped", skipped},
          {"ratio_to_memcpy", std::move(ratios)}};
}

void write_comm_bench_report(const CommBenchResult& result, const std::string& path) {
  write_file_atomically(path, result.to_json().dump(2) + "\n");
}

}  // namespace zero3
