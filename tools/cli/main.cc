// zero3: train with ZeRO-3 over simulated ranks or GPUs, fuzz it, replay traces.
// Exit codes (README.md): 0 ok, 1 usage or bad input, 2 correctness, 3 liveness, 4 backend.
#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>

#include "core/base/errors.h"
#include "tools/cli/bench_comm_command.h"
#include "tools/cli/commands.h"
#include "tools/runs/thread_budget.h"

int main(int argc, char** argv) {
  zero3::wait_passively(argv);
  zero3::fit_threads_to_the_node();
  CLI::App app{
      "zero3: one ZeRO-3 (fully sharded data parallel) core, trained over a deterministic simulated\n"
      "communicator or CUDA + NCCL, with a property-based harness and trace replay.\n\n"
      "Start with `zero3 demo`, then `zero3 train --help`.\n"
      "Exit codes: 0 ok, 1 usage/bad input, 2 correctness, 3 liveness (deadlock, mismatch, peer failure),\n"
      "4 backend (CUDA, NCCL, no device)."};
  app.require_subcommand(1);
  zero3::add_demo_command(app);
  zero3::add_train_command(app);
  zero3::add_inspect_command(app);
  zero3::add_fuzz_command(app);
  zero3::add_consolidate_command(app);
  zero3::add_replay_command(app);
  CLI::App* bench = app.add_subcommand("bench", "Benchmarks: measured ratios against a baseline taken in the same run");
  bench->require_subcommand(1);
  zero3::add_bench_comm_command(*bench);
  zero3::add_bench_step_command(*bench);
  zero3::add_bench_calibrate_command(*bench);
  // CLI11 answers an unknown command with "A subcommand is required", which does not say which
  // word it did not know; name it and the commands there are.
  if (argc > 1 && argv[1][0] != '-') {
    std::string known;
    bool found = false;
    for (const CLI::App* command : app.get_subcommands([](const CLI::App*) { return true; })) {
      found = found || command->check_name(argv[1]);
      known += (known.empty() ? "" : ", ") + command->get_name();
    }
    if (!found) {
      std::fprintf(stderr, "error: unknown command '%s' (commands: %s; see zero3 --help)\n", argv[1], known.c_str());
      return zero3::kExitBadInput;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    // --help is a ParseError with exit code 0; every real usage error becomes exit code 1.
    return app.exit(error) == 0 ? zero3::kExitOk : zero3::kExitBadInput;
  } catch (const zero3::Zero3Error& error) {
    std::fflush(stdout);
    std::fprintf(stderr, "error: %s\n", error.what());
    // Ranks that issue different collectives at different modules ran different modules: most often
    // data-dependent routing (an MoE), whose remedy a newcomer cannot guess from the report alone.
    const auto* mismatch = dynamic_cast<const zero3::CollectiveMismatchError*>(&error);
    if (mismatch != nullptr && mismatch->ranks_at_different_modules()) {
      std::fprintf(stderr,
                   "hint: when the data decides which modules a rank runs (MoE routing), gather their common parent "
                   "as one unit: {\"zero_optimization\": {\"zero3_leaf_modules\": [TYPE or NAME]}} in --config "
                   "(e.g. [\"moe\"]), as DeepSpeed's set_z3_leaf_modules does\n");
    }
    return error.exit_code();
  } catch (const std::exception& error) {
    std::fflush(stdout);
    std::fprintf(stderr, "internal error: %s\n", error.what());
    return zero3::kExitCorrectness;
  }
  return zero3::kExitOk;
}
