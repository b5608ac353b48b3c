// `zero3 fuzz`: the property harness over generated cases, from the command line. Prints the seed
// and a replay command, a progress bar on a terminal, a table by property, and writes each shrunk
// counterexample as a case file that `zero3 fuzz --replay FILE` re-runs. Exit 2 on a counterexample.
#include <cstdio>
#include <memory>
#include <random>

#include "core/base/errors.h"
#include "core/base/math_bugs.h"
#include "core/base/text.h"
#include "props/fuzzer.h"
#include "props/injections/injection_table.h"
#include "props/injections/injections.h"
#include "props/injections/placeholder_rates.h"
#include "props/target/target_upstream.h"
#include "tools/cli/commands.h"
#include "tools/cli/fuzz_faults_command.h"
#include "tools/cli/fuzz_target_command.h"
#include "tools/runs/progress.h"
#include "tools/runs/train_options.h"

namespace zero3 {

namespace {

struct FuzzFlags {
  FuzzOptions options;
  bool seed_given = false;
  std::string out_dir = "fuzz-out";
  std::string replay_path;
  bool list_injections = false;
  bool explain = false;
  std::string device = "cpu";
  bool injection_table = false;
  bool placeholder_rates = false;
  std::vector<uint64_t> table_seeds = {1, 2, 3};
  bool fault_campaign = false;
  FaultCampaignCommandOptions campaign{};
  TargetCommandOptions target{};  // --target, --target-runner: an outside framework
  std::string math_bug;           // --math-bug NAME, parsed into target.math_bug
};

// --math-bug's help: every name with its description, one per line.
std::string math_bug_help() {
  std::string help = "--target: plant a bug in the arithmetic zero3's engine and its DDP reference share, on zero3's "
                     "side only (the runner never sees it): zero3's own properties cannot catch these, the outside "
                     "reference must (a reference_disagreement). One of:";
  for (MathBug bug : all_math_bugs()) {
    help += std::string("\n  ") + math_bug_name(bug) + ": " + math_bug_description(bug);
  }
  return help;
}

std::string replay_command(const FuzzFlags& flags) {
  std::string command = "zero3 fuzz --cases " + std::to_string(flags.options.cases) + " --seed " +
                        std::to_string(flags.options.seed) + " --max-ranks " + std::to_string(flags.options.max_ranks);
  if (!flags.options.inject.empty()) command += " --inject " + flags.options.inject;
  for (const std::string& property : flags.options.properties) command += " --property " + property;
  if (flags.device != "cpu") command += " --device " + flags.device;
  return command;
}

// What the table's columns and each property mean (zero3 fuzz --explain).
void print_legend() {
  std::printf("zero3 fuzz runs each property over --cases generated cases (models, configs, world sizes, faults)\n"
              "and stops a property at its first counterexample, which RapidCheck then shrinks.\n\n"
              "columns:\n"
              "  cases          generated cases run for the property (shrinking not counted)\n"
              "  result         passed, or COUNTEREXAMPLE\n"
              "  first failure  the number of the first failing case\n"
              "  shrinks A/T    while shrinking: A smaller failing cases accepted out of T tried\n"
              "  time           seconds, shrinking included\n\n"
              "properties:\n");
  for (const FuzzProperty& property : fuzz_properties()) {
    std::printf("  %-22s %s\n", property.name.c_str(), property.description.c_str());
  }
}

void print_table(const FuzzReport& report) {
  std::printf("\n%-22s %7s  %-15s %-14s %-12s %8s\n", "property", "cases", "result", "first failure", "shrinks",
              "time");
  for (const PropertyResult& property : report.properties) {
    const std::string failure = property.failed ? "case " + std::to_string(property.failing_case) : "-";
    const std::string shrinks = property.failed ? std::to_string(property.shrinks_accepted) + "/" +
                                                      std::to_string(property.shrinks_tried)
                                                : "-";
    std::printf("%-22s %7lld  %-15s %-14s %-12s %7.1fs\n", property.property.c_str(),
                static_cast<long long>(property.cases), property.failed ? "COUNTEREXAMPLE" : "passed",
                failure.c_str(), shrinks.c_str(), property.seconds);
  }
  if (report.first_failure()) std::printf("(zero3 fuzz --explain says what the columns mean)\n");
  for (const PropertyResult& property : report.properties) {
    if (property.failing_without_injection == 0) continue;
    std::printf("note: %lld %s cases failed without the injection too; they are not counted against it\n",
                static_cast<long long>(property.failing_without_injection), property.property.c_str());
  }
  const double rate = report.seconds > 0.0 ? static_cast<double>(report.cases()) / report.seconds : 0.0;
  std::printf("total: %lld cases in %.1f s (%.1f cases/s)%s\n", static_cast<long long>(report.cases()),
              report.seconds, rate, report.budget_spent ? ", stopped by the time budget" : "");
}

void save_counterexample(const FuzzFlags& flags, const PropertyResult& failure) {
  std::printf("\ncounterexample for %s (shrunk: %s):\n%s\n", failure.property.c_str(),
              describe(failure.counterexample).c_str(), failure.message.c_str());
  std::string name = failure.property + "-seed" + std::to_string(flags.options.seed);
  if (!flags.options.inject.empty()) name += "-" + flags.options.inject;
  const std::string path = write_counterexample(flags.out_dir, name, failure);
  std::printf("  written to %s\n  replay: zero3 fuzz --replay %s\n", path.c_str(), path.c_str());
  // A counterexample of the engine itself (not of an injected bug) belongs in the regression corpus
  // once it is fixed.
  if (flags.options.inject.empty()) {
    std::printf("  once fixed, keep it: cp %s traces/regressions/ (CI replays every case there)\n", path.c_str());
  }
}

void run_fuzz_command(FuzzFlags& flags) {
  if (!flags.seed_given) flags.options.seed = std::random_device{}() % 1'000'000'000;
  flags.options.device = simulated_device(flags.device);
  const size_t properties =
      flags.options.properties.empty() ? fuzz_properties().size() : flags.options.properties.size();
  std::printf("zero3 fuzz seed=%llu cases=%lld per property, %zu properties, max-ranks=%d, inject=%s, device=%s\n",
              static_cast<unsigned long long>(flags.options.seed), static_cast<long long>(flags.options.cases),
              properties, flags.options.max_ranks,
              flags.options.inject.empty() ? "none" : flags.options.inject.c_str(), flags.device.c_str());
  std::printf("  replay: %s\n", replay_command(flags).c_str());
  std::fflush(stdout);
  ProgressBar progress(flags.options.cases * static_cast<int64_t>(properties), "fuzz");
  int64_t cases_before = 0;  // cases of the properties already done
  int64_t cases_last = 0;
  std::string current;
  flags.options.on_progress = [&](const FuzzProgress& at) {
    if (at.property != current) {
      cases_before += cases_last;
      current = at.property;
    }
    cases_last = at.cases;
    const double rate = at.elapsed_s > 0.0 ? static_cast<double>(cases_before + at.cases) / at.elapsed_s : 0.0;
    std::string status = at.property + " " + std::to_string(static_cast<int64_t>(rate)) + " cases/s";
    if (at.shrinks_tried > 0) status += ", shrinking (" + std::to_string(at.shrinks_tried) + " tried)";
    progress.update(cases_before + at.cases, status);
  };
  const FuzzReport report = run_fuzz(flags.options);
  progress.finish();
  print_table(report);
  for (const PropertyResult& property : report.properties) {
    if (property.failed) save_counterexample(flags, property);
  }
  if (report.first_failure() != nullptr) {
    throw CorrectnessError("fuzz found a counterexample (seed=" + std::to_string(flags.options.seed) + ")");
  }
}

// Every injection fuzzed with each seed; exit 2 unless every one is caught by a verdict on the
// engine (not the harness throwing) for every seed.
void run_injection_table_command(const FuzzFlags& flags) {
  InjectionTableOptions options{.seeds = flags.table_seeds, .cases = flags.options.cases,
                                .max_ranks = flags.options.max_ranks, .device = simulated_device(flags.device)};
  if (!flags.options.inject.empty()) options.injections = {flags.options.inject};
  std::printf("zero3 fuzz --injection-table: %zu seeds, up to %lld cases per property, max-ranks %d, device %s\n",
              options.seeds.size(), static_cast<long long>(options.cases), options.max_ranks, flags.device.c_str());
  std::fflush(stdout);
  const InjectionTable table = run_injection_table(options);
  std::printf("\n%s\n(%.1f s)\n", injection_table_markdown(table).c_str(), table.seconds);
  std::vector<std::string> missed;
  for (const InjectionRow& row : table.rows) {
    if (!row.caught_every_seed()) missed.push_back(row.injection);
  }
  if (!missed.empty()) throw CorrectnessError("not caught for every seed: " + join_words(missed));
}

// Broadcast-trap cases under each placeholder policy; exit 2 unless the error policy gives the
// specific error every time the trap is reached.
void run_placeholder_rates_command(const FuzzFlags& flags) {
  const PlaceholderRatesOptions options{.cases = flags.options.cases, .seed = flags.options.seed,
                                        .max_ranks = flags.options.max_ranks};
  std::printf("zero3 fuzz --placeholder-rates: %lld broadcast-trap cases, seed %llu, max-ranks %d\n",
              static_cast<long long>(options.cases), static_cast<unsigned long long>(options.seed), options.max_ranks);
  std::fflush(stdout);
  const PlaceholderRates rates = measure_placeholder_rates(options);
  std::printf("\n%s\n(%.1f s)\n", placeholder_rates_table(rates).c_str(), rates.seconds);
  const PolicyRates& error = rates.policies.front();
  if (error.specific_error != error.trap_reached) {
    throw CorrectnessError("the error policy did not give the specific error every time the trap was reached (" +
                           std::to_string(error.specific_error) + " of " + std::to_string(error.trap_reached) + ")");
  }
}

void run_replay(const std::string& path) {
  const ReplayResult replay = replay_case_file(path);
  std::printf("replay %s: property %s %s\n", path.c_str(), replay.property.c_str(),
              replay.reproduced ? "FAILS again (reproduced)" : "passes now (not reproduced)");
  if (replay.reproduced) std::printf("%s\n", replay.message.c_str());
  if (replay.reproduced && replay.expected_message.find(replay.message) == std::string::npos) {
    std::printf("note: the message differs from the saved one:\n%s\n", replay.expected_message.c_str());
  }
  if (replay.reproduced) throw CorrectnessError("the counterexample in " + path + " reproduces");
}

// A subcommand for each mode a flag selects: `zero3 fuzz target deepspeed`, `fuzz faults`, `fuzz
// injections`, `fuzz placeholders`, `fuzz replay FILE`. Each only sets its mode's flag (the flag
// spellings keep working, and the one dispatch below serves both); fuzz's options may follow it
// (fallthrough): `zero3 fuzz target deepspeed --cases 300`.
void add_mode_subcommands(CLI::App& fuzz, const std::shared_ptr<FuzzFlags>& flags) {
  CLI::App* target = fuzz.add_subcommand(
      "target", "fuzz an outside framework: the same as --target NAME (its options: zero3 fuzz --help)");
  target->add_option("name", flags->target.target,
                     "torch (DDP, the control), deepspeed (ZeRO-3), fsdp2, or your own with --target-runner")
      ->required();
  CLI::App* replay = fuzz.add_subcommand("replay", "re-run a saved case: the same as --replay FILE");
  replay->add_option("file", flags->replay_path, "a case.json saved by zero3 fuzz or zero3 fuzz target")->required();
  const struct {
    const char* name;
    const char* help;
    bool FuzzFlags::*flag;
  } modes[] = {
      {"faults", "the fault campaign and its reliability table: the same as --fault-campaign", &FuzzFlags::fault_campaign},
      {"injections", "the mutation-score table: the same as --injection-table", &FuzzFlags::injection_table},
      {"placeholders", "the placeholder policies' rates: the same as --placeholder-rates", &FuzzFlags::placeholder_rates},
  };
  for (const auto& mode : modes) {
    CLI::App* command = fuzz.add_subcommand(mode.name, mode.help);
    command->parse_complete_callback([flags, flag = mode.flag] { (*flags).*flag = true; });
    command->fallthrough();
  }
  target->fallthrough();
  replay->fallthrough();
}

}  // namespace

void add_fuzz_command(CLI::App& app) {
  auto flags = std::make_shared<FuzzFlags>();
  CLI::App* command = app.add_subcommand(
      "fuzz", "Property-based fuzzing of the ZeRO-3 engine against the DDP reference on generated models,\n"
              "configs, world sizes and faults; shrinks and saves counterexamples. Exit 2 on a counterexample.\n"
              "Example: zero3 fuzz --cases 200 --seed 7 --inject grad-padding-uninitialized\n"
              "Modes: zero3 fuzz target deepspeed --cases 300, fuzz faults --runs 200, fuzz injections,\n"
              "fuzz placeholders, fuzz replay FILE (each also spelled as a flag below).");
  command->add_option("--cases", flags->options.cases, "cases per property")
      ->capture_default_str()
      ->check(CLI::Range(1, 1'000'000));
  command->add_option_function<uint64_t>("--seed", [flags](uint64_t seed) {
    flags->options.seed = seed;
    flags->seed_given = true;
  }, "seed of the case generator (default: a random one, printed)");
  command->add_option("--max-ranks", flags->options.max_ranks, "largest simulated world size")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  command->add_option("--inject", flags->options.inject, "switch one injection on (see --list-injections)");
  std::string property_names;
  for (const FuzzProperty& property : fuzz_properties()) {
    property_names += (property_names.empty() ? "" : ", ") + property.name;
  }
  command->add_option("--property", flags->options.properties, "run only this property (repeatable): " + property_names);
  command->add_option("--out", flags->out_dir, "folder for counterexample case files")->capture_default_str();
  command->add_option("--time-budget", flags->options.time_budget_s, "stop starting new cases after this many seconds")
      ->check(CLI::Range(0.0, 1e9));
  command->add_option("--replay", flags->replay_path, "re-run the case in this case file; exit 2 if it still fails");
  add_simulated_device_option(*command, flags->device);
  command->add_flag("--list-injections", flags->list_injections, "list the injections, one per line");
  command->add_flag("--explain", flags->explain, "say what each column of the table and each property means");
  command->add_flag("--injection-table", flags->injection_table,
                    "fuzz every injection (or --inject's) with each of --seeds, stopping at the first counterexample, "
                    "and print the mutation-score table: which property caught it, at which case, how small it "
                    "shrank, and cases that failed without it; exit 2 unless every one is caught for every seed");
  command->add_flag("--placeholder-rates", flags->placeholder_rates,
                    "run --cases broadcast-trap cases under each placeholder policy (error, empty, scalar) and print, "
                    "of the cases where a raw handle read an ungathered parameter, how many ended in a silent wrong "
                    "result, the specific error or another error; exit 2 unless `error` always gives the specific one");
  command->add_flag("--fault-campaign", flags->fault_campaign,
                    "train --runs generated cases (models, stages, levers, HSDP/hpZ groups, bf16, GAS, checkpoint "
                    "series) each with and without a fault plan drawn from the campaign's (every kind BUGGIFY "
                    "style, or one kind aimed at one site class: crash@checkpoint, alloc@offload, ...), and print "
                    "the outcomes per fault site: correct results, specific errors, hangs, silent corruptions, "
                    "unexplained errors; the first failure is shrunk and saved. Exit 2 on a hang, corruption, "
                    "unexplained error or a damaged last checkpoint");
  command->add_option("--runs", flags->campaign.runs, "--fault-campaign: generated cases (or fault seeds 1..N with --model)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
  command->add_option("--model", flags->campaign.model,
                      "--fault-campaign: one fixed model (e.g. gpt-tiny at W=4, 5 steps) under --runs fault seeds "
                      "instead of generated cases: the first reliability table's campaign");
  command->add_option("--faults", flags->campaign.plan, "--fault-campaign --model: the fault plan (zero3 train --faults)")
      ->capture_default_str();
  command->add_option("--target", flags->target.target,
                      "fuzz an outside framework instead: torch (DDP, the control), deepspeed (ZeRO-3) or fsdp2, "
                      "through the repository's runner in the differential venv; or any name with --target-runner. "
                      "Each generated case is trained by the framework and by an unsharded reference; a crash, hang "
                      "or silent divergence counts only when a second run of the case alone (fresh ranks, a longer "
                      "limit) fails the same way, else it is logged as flaky; a finding is shrunk and saved with a "
                      "standalone plain-PyTorch script (kept only when running it alone reproduces the finding), an "
                      "ISSUE.md and its upstream status (traces/findings/upstream.json); exit 2 on a finding, 4 when "
                      "the runner is broken (tools/zero3py/runners/PROTOCOL.md)");
  command->add_option("--target-runner", flags->target.runner_command,
                      "--target: the command that starts your own runner (speaking PROTOCOL.md), run by /bin/sh");
  command->add_option("--report", flags->target.report_path,
                      "--target: write findings (with their scripts, issue texts and upstream status), flaky cases, "
                      "versions, cases and cases per second as JSON to this file; with --replay, the replay's verdict");
  command->add_option("--upstream", flags->target.upstream_path,
                      "--target: the upstream table findings are matched against (default: the repository's "
                      "traces/findings/upstream.json)");
  command->add_flag("--target-hsdp", flags->target.space.shard_groups,
                    "--target: also draw HSDP cases (zero.shard_group_size, blocks strictly inside W; needs "
                    "--max-ranks 4 or more): fsdp2 trains them on a 2-D mesh; deepspeed answers unsupported (0.19.8 "
                    "removed MiCS)");
  command->add_flag("--target-transformer", flags->target.space.transformer,
                    "--target: draw the models zero3's own fuzz draws: half of them token models (ids in, an "
                    "embedding first, 0-2 pre-norm transformer blocks, a tied or linear LM head), causal "
                    "self-attention among the layers of every model");
  command->add_flag("--target-levers", flags->target.space.levers,
                    "--target: also draw the levers, each off in most cases and shrunk toward off: ZeRO stages 1 "
                    "and 2 (fsdp2: reshard_after_forward=False), optimizer and parameter offload to the CPU, hpZ "
                    "blocks (zero_hpz_partition_size; fsdp2: reshard_after_forward=G), activation checkpointing "
                    "of layer types (torch.utils.checkpoint)");
  command->add_flag("--target-bf16", flags->target.space.bf16,
                    "--target: a third of the cases in bf16 with f32 master weights (deepspeed: bf16.enabled; fsdp2: "
                    "MixedPrecisionPolicy(bf16 parameters, f32 reduction)), judged at bf16's tolerances");
  command->add_flag("--target-memory", flags->target.space.memory,
                    "--target: a quarter of the cases measure every rank's tensor bytes per step over 4 steps; a rank "
                    "that holds more after every step from the second on is a memory_growth finding");
  command->add_option("--math-bug", flags->math_bug, math_bug_help());
  command->add_option("--max-findings", flags->target.findings_max,
                      "--target: end the campaign once this many distinct findings are kept (0: run all --cases)")
      ->check(CLI::Range(int64_t{0}, int64_t{1'000'000}))
      ->capture_default_str();
  command->add_option("--shrink-budget", flags->target.shrink_budget_s,
                      "--target: seconds of shrinking per finding; past it the smallest case so far is kept")
      ->check(CLI::Range(0.0, 1e9))
      ->capture_default_str();
  command->add_option("--seeds", flags->table_seeds, "seeds of --injection-table, comma-separated")
      ->delimiter(',')
      ->capture_default_str();
  add_mode_subcommands(*command, flags);
  CLI::Option* max_ranks_option = command->get_option("--max-ranks");
  command->callback([flags, max_ranks_option] {
    if (flags->explain) return print_legend();
    if (!flags->target.target.empty()) {
      TargetCommandOptions& target = flags->target;
      target.cases = flags->options.cases;
      target.seed = flags->seed_given ? flags->options.seed : std::random_device{}() % 1'000'000'000;
      // A runner's ranks are processes on this machine's cores: 4 unless asked.
      target.max_ranks = max_ranks_option->count() > 0 ? flags->options.max_ranks : 4;
      target.out_dir = flags->out_dir;
      target.replay_path = flags->replay_path;
      if (target.upstream_path.empty()) target.upstream_path = default_upstream_table_path();
      if (!flags->math_bug.empty()) target.math_bug = parse_math_bug(flags->math_bug);
      return run_target_fuzz_command(target);
    }
    const TargetSpace& space = flags->target.space;
    if (!flags->target.runner_command.empty() || !flags->target.report_path.empty() || space.shard_groups ||
        space.transformer || space.levers || space.bf16 || space.memory || !flags->target.upstream_path.empty()) {
      throw InputError(
          "--target-runner, --target-hsdp, --target-transformer, --target-levers, --target-bf16, --target-memory, --report and "
          "--upstream need --target NAME");
    }
    // zero3's own properties compare two sides that share the planted math: only --target can catch it.
    if (!flags->math_bug.empty() || flags->target.findings_max > 0) {
      throw InputError("--math-bug and --max-findings need --target NAME");
    }
    if (flags->list_injections) {
      for (const Injection& injection : all_injections()) {
        std::printf("%-30s %s\n", injection.name.c_str(), injection.description.c_str());
      }
      return;
    }
    if (!flags->replay_path.empty()) return run_replay(flags->replay_path);
    if (flags->injection_table) return run_injection_table_command(*flags);
    if (flags->fault_campaign) {
      FaultCampaignCommandOptions campaign = flags->campaign;
      campaign.seed = flags->options.seed;
      campaign.seed_given = flags->seed_given;
      if (max_ranks_option->count() > 0) campaign.max_ranks = flags->options.max_ranks;
      campaign.out_dir = flags->out_dir;
      return run_fault_campaign_command(campaign);
    }
    if (flags->placeholder_rates) {
      if (!flags->seed_given) flags->options.seed = 1;
      return run_placeholder_rates_command(*flags);
    }
    run_fuzz_command(*flags);
  });
}

}  // namespace zero3
