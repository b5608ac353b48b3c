// `zero3 bench comm --backend mpi`: the same sizes and checked values as the simulated benchmark
// (tools/bench/comm_bench.h), timed over MpiCommunicator with one process per rank, nccl-tests columns,
// and beside each row the simulator's figure for the same size measured in the same session by
// rank 0 (while the other ranks sleep), with the ratio of the two bus bandwidths.
#pragma once
#include <string>

#include "tools/bench/comm_bench.h"

namespace zero3 {

// Run by every process of the job; rank 0 prints the table and writes the report (when
// report_path is not empty). options.world 0 means the launcher's world size; otherwise it must
// equal it. Throws CorrectnessError when any element was wrong.
void run_mpi_comm_bench(CommBenchOptions options, const std::string& report_path);

}  // namespace zero3
