// `zero3 bench comm --backend cuda`: all_gather, reduce_scatter and all_reduce over NCCL on the
// GPUs this process drives (or one GPU per process under a launcher), nccl-tests' columns: size,
// count, time, algbw, busbw and #wrong, the values generated from (seed, rank, index) as the
// simulated benchmark's are (tools/bench/comm_bench.h), so every result is checked exactly.
#pragma once
#include <string>

#include "tools/bench/comm_bench.h"

namespace zero3 {

struct CudaCommBenchOptions {
  CommBenchOptions sizes;      // world: 0 for every GPU (or the launcher's world), else --gpus
  std::string report_path;     // "" for none
  bool describe_only = false;  // print the runtime, NCCL and device line and stop
};

// Rank 0 prints the table and writes the report. Throws CorrectnessError when an element was
// wrong, BackendError (exit 4) without a usable GPU.
void run_cuda_comm_bench(const CudaCommBenchOptions& options);

}  // namespace zero3
