// The communication benchmark behind `zero3 bench comm`: all-gather and reduce-scatter over a
// SimWorld of W ranks, nccl-tests style. Size is the whole buffer (count * W * 4 bytes, f32);
// algbw = size / time, busbw = algbw * (W - 1) / W; #wrong counts elements that differ from values
// computed independently from (seed, rank, index), small integers so that sums are exact.
//
// One thread moves the data of every rank, so the fair yardstick is the machine's memcpy
// bandwidth, measured in the same run for the same data movement: ratio_to_memcpy = (delivered /
// time) / memcpy bandwidth, where delivered is the bytes all ranks receive: W * size for all-gather
// (each rank gets the whole buffer), size for reduce-scatter (each rank gets its block of size /
// W). The memcpy copies one size-byte source into as many size-byte destinations as the ranks
// receive whole buffers (W for all-gather, 1 for reduce-scatter), so that it writes the same bytes
// over the same amount of memory: a single size-byte memcpy would stay in a cache that W outputs of
// that size do not fit, and measure another regime. time is the mean per collective over the
// fastest of 5 rounds, each of enough iterations (3 to 1,000) to move about 2 GiB per size.
// The MPI and NCCL benchmarks (mpi_comm_bench.h, cuda_comm_bench.h) reuse its rows, values and
// printing. It lives in tools/, not sim/: its wall clock must never feed back into a simulation.
//
//   CommBenchResult result = run_comm_bench({.world = 4}, std::cout);
//   write_comm_bench_report(result, "comm.json");
#pragma once
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/tensor/tensor.h"

namespace zero3 {

struct CommBenchOptions {
  int world = 2;
  uint64_t seed = 1;
  int64_t bytes_min = int64_t{1} << 10;
  int64_t bytes_max = int64_t{256} << 20;          // sizes go up by 4x from bytes_min to here
  int64_t memory_bytes_max = int64_t{8} << 30;     // all buffers of one size; larger sizes are skipped
};

struct CommBenchRow {
  std::string op{};        // "all_gather" or "reduce_scatter"
  int64_t bytes = 0;       // count * world * 4
  int64_t count = 0;       // elements per rank block
  int iterations = 0;
  int64_t delivered_bytes = 0;  // received by all ranks together per collective
  double time_us = 0.0;    // mean per collective in the fastest of 3 rounds
  double algbw_gbps = 0.0;
  double busbw_gbps = 0.0;
  int64_t wrong = 0;
  double memcpy_gbps = 0.0;
  double ratio_to_memcpy = 0.0;
};

struct CommBenchResult {
  CommBenchOptions options;
  std::vector<CommBenchRow> rows{};
  std::vector<std::string> skipped{};  // sizes left out, with the reason
  int64_t wrong_total() const;
  // {"world", "seed", "rows": [...], "skipped": [...], "ratio_to_memcpy": {op: {bytes: ratio}}}
  nlohmann::json to_json() const;
};

// The pieces `zero3 bench comm --backend mpi` shares, so that both benchmarks run the same sizes
// on the same checked values. --------------------------------------------------------------

// Rank `rank`'s send element `index`: small integers in [-8, 8], so every sum is exact in f32.
float comm_bench_value(uint64_t seed, int rank, int64_t index);
// Elements of this rank's output that differ from the values computed from (seed, rank, index).
int64_t count_wrong_elements(bool gather, uint64_t seed, int rank, int world, int64_t count, const Tensor& recv);
// Collectives per round for a size: about 2 GiB delivered, at least 3 and at most 100.
int comm_bench_iterations(int64_t delivered_bytes);
std::string format_bytes(int64_t bytes);

struct CommBenchSize {
  std::string op{};
  bool gather = true;
  int64_t bytes = 0;    // count * world * 4
  int64_t count = 0;    // elements per rank block
  std::string skipped{};  // why this size is left out; "" when it runs
};
// Every size of the table in order (all-gathers, then reduce-scatters), the skipped ones with why
// (also appended to `skipped`).
std::vector<CommBenchSize> comm_bench_sizes(const CommBenchOptions& options, std::vector<std::string>* skipped);

struct CommBenchMeasurement {
  double time_s = 0.0;  // mean per collective in the fastest of 3 rounds
  int64_t wrong = 0;    // over every rank
};
// One size on a fresh SimWorld: a warm-up, then 3 rounds of `iterations` collectives.
CommBenchMeasurement time_simulated_collective(bool gather, const CommBenchOptions& options, int64_t count,
                                               int iterations);
// InputError for options out of range.
void check_comm_bench_options(const CommBenchOptions& options);

// Throws InputError for options out of range. Prints the table to `out` as rows complete.
CommBenchResult run_comm_bench(const CommBenchOptions& options, std::ostream& out);
// Written atomically (temporary file + rename).
void write_comm_bench_report(const CommBenchResult& result, const std::string& path);

}  // namespace zero3
