// `zero3 bench calibrate`: a hardware profile of the machine at hand, measured rather than taken
// from a datasheet, in traces/hardware's format so that `zero3 replay --hardware FILE` prices a
// trace with it. Every rank of the communicator measures at once (under mpirun -np W, W processes
// share the cores exactly as W training ranks do), rank 0 writes:
//   - GEMM throughput at the model's own shapes: for each 2-D parameter [out, in] and T tokens per
//     micro-step, the forward product and both backward ones (peak_flops, flops_efficiency 1);
//   - memory bandwidth (a copy of a buffer larger than the caches), and the optimizer step over one
//     buffer of the rank's shard size: AdamW's elements per second (optimizer, host_optimizer) and
//     the bandwidth of its other passes, the norm, the refresh's cast and the zeroing
//     (optimizer_passes);
//   - the rates that price a trace's recorded kernel work (traces/replay/kernel_rates.h), at the
//     model's activation shapes through the real kernels: memory_bandwidth (an add, a copy and a
//     bias sum per width, bytes as the recorder counts them), transcendentals (GELU, cross-entropy,
//     causal softmax) and kernel_call (a one-element kernel);
//   - each collective's time over the communicator at sizes from the model's parameters up, and
//     the ring model's latency and bandwidth fitted to them by least squares (nvlink/infiniband:
//     the one link of a single machine), with each size's measured and fitted time kept.
// Each figure's `source` says how it was measured; the raw tables are under `measured`.
//
//   nlohmann::json profile = calibrate_machine(comm, cpu_kernels(), {.model = "gpt-tiny"}, std::cerr);
#pragma once
#include <cstdint>
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/sharding/communicator.h"
#include "core/tensor/kernels.h"

namespace zero3 {

struct CalibrateOptions {
  std::string model = "gpt-tiny";  // built-in name or spec path: whose GEMM shapes are measured
  int64_t micro_batch = 4;         // sequences (gpt) or rows per rank and micro-step
  double seconds_per_figure = 0.15;  // each timing repeats its operation for about this long
  std::string backend = "mpi";     // named in the sources
  bool measure_collectives = true;  // false (sim): the simulator's default link, said so
};

// Run by every rank of `comm` together. The profile (rank 0's; the others return it too).
nlohmann::json calibrate_machine(Communicator& comm, Kernels& kernels, const CalibrateOptions& options,
                                 std::ostream& progress);

// The ring model fitted to measured collective times by least squares over (steps, bytes):
// time = latency * steps + bytes_term / bandwidth (all_gather and reduce_scatter: W - 1 steps and
// (W - 1) / W of the bytes; all_reduce twice both). Exposed for its test.
struct RingFit {
  double latency_s = 0.0;
  double bytes_per_s = 0.0;
  double worst_relative_error = 0.0;  // over the points fitted
};
struct CollectiveSample {
  CollectiveOp op;
  int64_t bytes;  // the whole buffer, as collective_time_s takes it
  double seconds;
};
RingFit fit_ring_model(const std::vector<CollectiveSample>& samples, int world);

}  // namespace zero3
