// `zero3 bench comm`: the simulated communicator's all-gather and reduce-scatter benchmark
// (tools/bench/comm_bench.h), printed nccl-tests style next to this machine's memcpy bandwidth.
//
//   CLI::App* bench = app.add_subcommand("bench", "benchmarks");
//   zero3::add_bench_comm_command(*bench);   // zero3 bench comm --ranks 4 --report comm.json
#pragma once
#include <CLI/CLI.hpp>

namespace zero3 {

// Registers `comm` under `bench_app`. Its callback throws InputError (exit 1) for a report path
// that cannot be written and CorrectnessError (exit 2) when any element was wrong.
void add_bench_comm_command(CLI::App& bench_app);

}  // namespace zero3
