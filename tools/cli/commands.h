// The zero3 CLI's subcommands; each add_*_command registers itself with its flags and callback.
// Callbacks report failure by throwing Zero3Error (its exit code reaches the shell).
#pragma once
#include <CLI/CLI.hpp>

namespace zero3 {

void add_train_command(CLI::App& app);
void add_demo_command(CLI::App& app);
void add_inspect_command(CLI::App& app);
void add_fuzz_command(CLI::App& app);
void add_bench_step_command(CLI::App& bench_app);
void add_bench_calibrate_command(CLI::App& bench_app);
void add_consolidate_command(CLI::App& app);
void add_replay_command(CLI::App& app);

}  // namespace zero3
